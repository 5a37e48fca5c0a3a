#ifndef TESSERA_PS_SERVER_CLIENT_DENSE_PLANE_CLIENT_H_
#define TESSERA_PS_SERVER_CLIENT_DENSE_PLANE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"
#include "proto/ps_service.pb.h"
#include "ps_server/client/plane_connections.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

using DensePlaneClientOptions = PlaneConnectionOptions;

// A worker's end of one parameter server's TCP data plane
// (dense_plane_server.h): the same PullDense and PushDense as PsClient's
// gRPC ones, with the same contracts and error codes. Pulled values are
// received straight into the caller's buffers, and gradients are sent
// straight from the caller's (no copy in user space on either side).
//
// Calls share the one connection to the server (plane_connections.h),
// with the row calls when the transport shares it: concurrent calls are
// pipelined on it, and a broken connection reads as gRPC's UNAVAILABLE or
// DEADLINE_EXCEEDED.
//
// Thread safety: all methods may be called concurrently.
class DensePlaneClient {
 public:
  explicit DensePlaneClient(DensePlaneClientOptions options);
  // On `connections`, shared with other clients of the same server.
  explicit DensePlaneClient(std::shared_ptr<PlaneConnections> connections);

  // `sync_step`: sync mode's step the pull reads for (sync_push.h).
  absl::Status PullDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<float>> out,
                         std::vector<int64_t>* versions,
                         std::optional<int64_t> sync_step = std::nullopt);
  absl::Status PushDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<const float>> grads,
                         absl::Span<const int64_t> base_versions,
                         PushResponse* response, const SyncPush* sync);

  // The same calls in two halves, so that one thread can have a call in
  // flight at every parameter server at once (a step's pull from each)
  // instead of a thread per server, which costs a wake-up each way per
  // call. Begin* sends the request; Finish (PlaneCall::Finish) waits for
  // the reply and reports an error of either half. Every argument must
  // stay valid (and `grads` unchanged) until Finish returns or the call is
  // dropped: the reply may be read into `out`, `versions` and `response`
  // by another call's thread before Finish. A call dropped unfinished has
  // its reply read into scratch; the connection stays.
  PlaneCall BeginPullDense(absl::Span<const std::string> shards,
                           absl::Span<const absl::Span<float>> out,
                           std::vector<int64_t>* versions,
                           std::optional<int64_t> sync_step = std::nullopt);
  PlaneCall BeginPushDense(absl::Span<const std::string> shards,
                           absl::Span<const absl::Span<const float>> grads,
                           absl::Span<const int64_t> base_versions,
                           PushResponse* response, const SyncPush* sync);

 private:
  PlaneCall BeginPull(absl::Span<const std::string> shards,
                      absl::Span<const absl::Span<float>> out,
                      std::vector<int64_t>* versions,
                      std::optional<int64_t> sync_step, bool awaited);
  PlaneCall BeginPush(absl::Span<const std::string> shards,
                      absl::Span<const absl::Span<const float>> grads,
                      absl::Span<const int64_t> base_versions,
                      PushResponse* response, const SyncPush* sync,
                      bool awaited);

  const std::shared_ptr<PlaneConnections> owned_;
  PlaneConnections& connections_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_DENSE_PLANE_CLIENT_H_
