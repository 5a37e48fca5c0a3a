// Reading replies of the data plane on the worker's side, shared by the
// dense and row clients (PlaneReplyReader's pieces, plane_channel.h).
#ifndef TESSERA_PS_SERVER_CLIENT_PLANE_REPLIES_H_
#define TESSERA_PS_SERVER_CLIENT_PLANE_REPLIES_H_

#include <cstddef>
#include <cstdint>

#include "common/data_plane/frame.h"
#include "common/data_plane/socket.h"
#include "proto/ps_service.pb.h"
#include "ps_server/client/plane_channel.h"

namespace tessera {

// Reads a reply header that must be `op`. An error reply is read in full
// and leaves the stream in step; anything else that fails does not.
PlaneReply ReadPlaneReplyHeader(Socket& socket, FrameOp op,
                                FrameHeader* header);
// Reads a pull's reply header (`op`) that must announce `parts` parts,
// one per shard asked; another count is out of step.
PlaneReply ReadPlanePullHeader(Socket& socket, FrameOp op, size_t parts);
// A push's reply (`op`): its PushResponse into *response (not touched
// when `discard`).
PlaneReply ReadPlanePushReply(Socket& socket, FrameOp op,
                              PushResponse* response, bool discard);
// Reads one part's header (ps_server/wire/dense_wire.h) of a pull's reply
// into *version and *bytes; a negative length is out of step. `discard`:
// the part's bytes are read and dropped too (the call was dropped).
PlaneReply ReadPlanePart(Socket& socket, bool discard, int64_t* version,
                         int64_t* bytes);
// Reads and drops `bytes` bytes (a reply part nobody waits for).
absl::Status SkipPlaneBytes(Socket& socket, int64_t bytes);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_PLANE_REPLIES_H_
