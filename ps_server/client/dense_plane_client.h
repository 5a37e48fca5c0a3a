#ifndef TESSERA_PS_SERVER_CLIENT_DENSE_PLANE_CLIENT_H_
#define TESSERA_PS_SERVER_CLIENT_DENSE_PLANE_CLIENT_H_

#include <cstdint>
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
// Connections are kept in a pool (plane_connections.h): concurrent calls
// each have their own, and a broken one is dropped and reads as gRPC's
// UNAVAILABLE or DEADLINE_EXCEEDED.
//
// Thread safety: all methods may be called concurrently.
class DensePlaneClient {
 public:
  explicit DensePlaneClient(DensePlaneClientOptions options);

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
  // call. Begin* sends the request; Finish* reads the reply, with the
  // arguments and the result of the whole call, and reports an error of
  // either half. A Pending that is never finished closes its connection.
  class Pending {
   public:
    Pending(Pending&&) = default;
    Pending& operator=(Pending&&) = default;

   private:
    friend class DensePlaneClient;
    explicit Pending(absl::StatusOr<Socket> socket)
        : socket_(std::move(socket)) {}
    absl::StatusOr<Socket> socket_;
  };
  Pending BeginPullDense(absl::Span<const std::string> shards,
                         std::optional<int64_t> sync_step = std::nullopt);
  absl::Status FinishPullDense(Pending call,
                               absl::Span<const std::string> shards,
                               absl::Span<const absl::Span<float>> out,
                               std::vector<int64_t>* versions);
  // `grads` must stay unchanged until FinishPushDense returns.
  Pending BeginPushDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<const float>> grads,
                         absl::Span<const int64_t> base_versions,
                         const SyncPush* sync);
  absl::Status FinishPushDense(Pending call, PushResponse* response);

 private:
  absl::Status CheckPullSizes(absl::Span<const std::string> shards,
                              absl::Span<const absl::Span<float>> out) const;
  absl::StatusOr<Socket> Acquire() { return connections_.Acquire(); }
  void Release(Socket socket) { connections_.Release(std::move(socket)); }
  absl::Status Prefixed(const char* call, const absl::Status& s) const {
    return connections_.Prefixed(call, s);
  }

  PlaneConnections connections_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_DENSE_PLANE_CLIENT_H_
