#ifndef TESSERA_PS_SERVER_CLIENT_ROW_PLANE_CLIENT_H_
#define TESSERA_PS_SERVER_CLIENT_ROW_PLANE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps_service.pb.h"
#include "ps_server/client/plane_connections.h"
#include "ps_server/client/ps_transport.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

using RowPlaneClientOptions = PlaneConnectionOptions;

// A worker's end of one parameter server's TCP data plane for sparse rows
// (row_plane_service.h): the same PullRows and PushRows as PsClient's gRPC
// ones, with the same contracts and error codes, for any number of shards
// in one round trip. Ids and gradients are sent straight from the
// caller's memory, and pulled rows received straight into the caller's
// buffers. Connections: plane_connections.h (calls from many threads are
// pipelined on one).
//
// Thread safety: all methods may be called concurrently.
class RowPlaneClient {
 public:
  explicit RowPlaneClient(RowPlaneClientOptions options);
  // On `connections`, shared with other clients of the same server.
  explicit RowPlaneClient(std::shared_ptr<PlaneConnections> connections);

  // Pulls parts[i]'s rows, in order (repeats allowed), into out[i], which
  // must hold exactly ids.size() * row_elements floats.
  // `sync_step`: sync mode's step the pull reads for (sync_push.h).
  absl::Status PullRows(absl::Span<const RowsPart> parts,
                        absl::Span<const absl::Span<float>> out,
                        std::optional<int64_t> sync_step = std::nullopt);
  // Pushes grads[i] (parts[i].ids.size() rows) to parts[i]'s shard; all
  // applied, or none on error.
  // With `sync`, a part of a sync step (a shard with no rows counts too).
  absl::Status PushRows(absl::Span<const RowsPart> parts,
                        absl::Span<const absl::Span<const float>> grads,
                        PushResponse* response, const SyncPush* sync = nullptr);

 private:
  const std::shared_ptr<PlaneConnections> owned_;
  PlaneConnections& connections_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_ROW_PLANE_CLIENT_H_
