// Reading replies of the data plane on the worker's side, shared by the
// dense and row clients (PlaneReplyReader's pieces, plane_channel.h).
#ifndef TESSERA_PS_SERVER_CLIENT_PLANE_REPLIES_H_
#define TESSERA_PS_SERVER_CLIENT_PLANE_REPLIES_H_

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
// A push's reply (`op`): its PushResponse into *response (not touched
// when `discard`).
PlaneReply ReadPlanePushReply(Socket& socket, FrameOp op,
                              PushResponse* response, bool discard);
// Reads and drops `bytes` bytes (a reply part nobody waits for).
absl::Status SkipPlaneBytes(Socket& socket, int64_t bytes);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_PLANE_REPLIES_H_
