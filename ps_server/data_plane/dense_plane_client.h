#ifndef TESSERA_PS_SERVER_DATA_PLANE_DENSE_PLANE_CLIENT_H_
#define TESSERA_PS_SERVER_DATA_PLANE_DENSE_PLANE_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"
#include "proto/ps_service.pb.h"
#include "ps_server/data_plane/plane_connections.h"
#include "ps_server/sync_push.h"

namespace tessera {

using DensePlaneClientOptions = PlaneConnectionOptions;

// A worker's end of one parameter server's TCP data plane
// (dense_plane_server.h): the same PullDense and PushDense as PsClient's
// gRPC ones, with the same contracts and error codes. Pulled values are
// received straight into the caller's buffers, and gradients are sent
// straight from the caller's (no copy in user space on either side).
//
// Connections are kept in a pool (plane_connections.h): concurrent calls
// each have their own, and a broken one is dropped and reads as gRPC's
// UNAVAILABLE or DEADLINE_EXCEEDED.
//
// Thread safety: all methods may be called concurrently.
class DensePlaneClient {
 public:
  explicit DensePlaneClient(DensePlaneClientOptions options);

  absl::Status PullDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<float>> out,
                         std::vector<int64_t>* versions);
  absl::Status PushDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<const float>> grads,
                         absl::Span<const int64_t> base_versions,
                         PushResponse* response, const SyncPush* sync);

 private:
  absl::StatusOr<Socket> Acquire() { return connections_.Acquire(); }
  void Release(Socket socket) { connections_.Release(std::move(socket)); }
  absl::Status Prefixed(const char* call, const absl::Status& s) const {
    return connections_.Prefixed(call, s);
  }

  PlaneConnections connections_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_DATA_PLANE_DENSE_PLANE_CLIENT_H_
