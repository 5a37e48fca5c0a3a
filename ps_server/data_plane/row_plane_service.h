#ifndef TESSERA_PS_SERVER_DATA_PLANE_ROW_PLANE_SERVICE_H_
#define TESSERA_PS_SERVER_DATA_PLANE_ROW_PLANE_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/socket.h"
#include "ps_server/ps_core.h"
#include "ps_server/row_table.h"
#include "ps_server/shard_store.h"

namespace tessera {

// The sparse half of a parameter server's TCP data plane: PullRows and
// PushRows framed as ps_server/wire/row_wire.h says, served on the
// connections DensePlaneServer accepted and authenticated.
//
// The guarantees are the gRPC path's (ps_server/row_reactors.h), with the
// same codes and messages: an unknown shard is NOT_FOUND naming it, an id
// the shard does not hold OUT_OF_RANGE, a wrong row size INVALID_ARGUMENT;
// a push applies nothing unless every declared byte arrived, every shard
// and id is valid and every float finite. Ids and values are received
// into buffers kept per connection (Scratch), so a steady stream of
// requests allocates nothing; pulled rows are copied from the table into
// one of them in pieces of at most 1 MiB and sent from there.
//
// Thread safety: the methods may run concurrently on different
// connections, each with its own Scratch.
class RowPlaneService {
 public:
  // What one connection reuses from request to request.
  struct Scratch {
    struct Part {
      std::string name;
      int64_t row_elements = 0;
      int64_t rows = 0;
      // What its values travel in (row_wire.h's kFrameRowPrecisions).
      RowPrecision precision = ROW_FP32;
      std::shared_ptr<RowTable> table;
      std::vector<int64_t> ids;
      std::vector<float> grads;
    };
    std::vector<Part> parts;
    std::vector<int64_t> ids;      // a pull's ids, all shards
    std::vector<float> values;     // a pull's rows on their way out
    std::vector<uint16_t> narrow;  // a push's 2-byte gradients on their way in
    std::string table;             // the request's declaration
  };

  // `core` must outlive this.
  explicit RowPlaneService(PsCore* core) : core_(core), store_(core->store()) {}

  // Each returns an error only when the connection must close (it broke,
  // or the peer does not speak the protocol); a refused request gets an
  // error reply and the connection goes on.
  absl::Status ServePull(Socket& socket, const FrameHeader& request,
                         Scratch* scratch);
  absl::Status ServePush(Socket& socket, const FrameHeader& request,
                         Scratch* scratch);

 private:
  // Reads and checks the table of `request` into scratch->parts (names,
  // row sizes, row counts; nothing looked up). An error means malformed.
  absl::Status ReadParts(Socket& socket, const FrameHeader& request,
                         Scratch* scratch);

  PsCore* const core_;
  ShardStore* const store_;  // the core's
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_DATA_PLANE_ROW_PLANE_SERVICE_H_
