#ifndef TESSERA_PS_SERVER_CLIENT_PLANE_CONNECTIONS_H_
#define TESSERA_PS_SERVER_CLIENT_PLANE_CONNECTIONS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"

namespace tessera {

struct PlaneConnectionOptions {
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

// The authenticated connections a worker holds to one parameter server's
// data plane, shared by the dense and the row clients' calls.
//
// A call takes an idle connection (or makes one: connect, handshake) and
// gives it back once its reply is read, so concurrent calls (a prefetching
// pull beside a push) each have their own. A connection that broke or
// timed out is not given back: the caller drops it, its call returns
// UNAVAILABLE or DEADLINE_EXCEEDED as on gRPC, and the next call connects
// afresh.
//
// Thread safety: all methods may be called concurrently.
class PlaneConnections {
 public:
  explicit PlaneConnections(PlaneConnectionOptions options);

  absl::StatusOr<Socket> Acquire();
  // Gives back a connection whose last reply was read in full.
  void Release(Socket socket);
  // `s` with the peer and the call in front of its message.
  absl::Status Prefixed(const char* call, const absl::Status& s) const;
  const std::string& peer() const { return options_.peer; }

 private:
  const PlaneConnectionOptions options_;
  absl::Mutex mu_;
  std::vector<Socket> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_PLANE_CONNECTIONS_H_
