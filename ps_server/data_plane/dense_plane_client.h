#ifndef TESSERA_PS_SERVER_DATA_PLANE_DENSE_PLANE_CLIENT_H_
#define TESSERA_PS_SERVER_DATA_PLANE_DENSE_PLANE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"
#include "proto/ps_service.pb.h"
#include "ps_server/sync_push.h"

namespace tessera {

struct DensePlaneClientOptions {
  std::string host;  // the parameter server's host
  // Asked before every new connection for the server's data plane port
  // (PsClient asks Health), so a restarted server's new port is found.
  std::function<absl::StatusOr<int>()> resolve_port;
  std::string job_token;   // proven in the handshake; empty: none
  double timeout_s = 120;  // connect, and no progress for this long
  // Prefixes every error, e.g. "ps 1 (10.0.0.2:2222)".
  std::string peer;
  // Every connection runs TLS with it (common/data_plane/tls.h), checking
  // that the server's certificate names `tls_server_name` (empty: `host`);
  // null: plain TCP.
  std::shared_ptr<const DataPlaneTls> tls;
  std::string tls_server_name;
};

// A worker's end of one parameter server's TCP data plane
// (dense_plane_server.h): the same PullDense and PushDense as PsClient's
// gRPC ones, with the same contracts and error codes. Pulled values are
// received straight into the caller's buffers, and gradients are sent
// straight from the caller's (no copy in user space on either side).
//
// Connections are kept in a pool: a call takes an idle one (or makes one:
// connect, handshake) and gives it back once the reply is read, so
// concurrent calls (a prefetching pull beside a push) each have their own.
// A connection that broke, or timed out, is dropped: the call returns
// UNAVAILABLE or DEADLINE_EXCEEDED, like the gRPC path, and the next call
// connects afresh.
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
  absl::StatusOr<Socket> Acquire();
  void Release(Socket socket);
  absl::Status Prefixed(const char* call, const absl::Status& s) const;

  const DensePlaneClientOptions options_;
  absl::Mutex mu_;
  std::vector<Socket> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_DATA_PLANE_DENSE_PLANE_CLIENT_H_
