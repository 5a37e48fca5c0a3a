#include "ps_server/client/plane_connections.h"

#include "absl/strings/str_cat.h"
#include "common/data_plane/handshake.h"

namespace tessera {

PlaneConnections::PlaneConnections(PlaneConnectionOptions options)
    : options_(std::move(options)) {}

absl::Status PlaneConnections::Prefixed(const char* call,
                                        const absl::Status& s) const {
  return absl::Status(
      s.code(), absl::StrCat(options_.peer, " ", call, ": ", s.message()));
}

absl::StatusOr<Socket> PlaneConnections::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    while (!idle_.empty()) {
      Socket socket = std::move(idle_.back());
      idle_.pop_back();
      // A server that restarted closed it; take the next, or connect.
      if (socket.IdleAndOpen()) return socket;
    }
  }
  absl::StatusOr<int> port = options_.resolve_port();
  if (!port.ok()) return port.status();
  if (*port <= 0) {
    return absl::UnavailableError(
        "the server announces no data plane (restarted with TLS?)");
  }
  absl::StatusOr<Socket> socket =
      Socket::Connect(options_.host, *port, options_.timeout_s);
  if (!socket.ok()) return socket.status();
  if (options_.tls != nullptr) {
    if (absl::Status s =
            options_.tls->Connect(*socket, options_.tls_server_name.empty()
                                               ? options_.host
                                               : options_.tls_server_name);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = OfferDataPlaneHandshake(*socket, options_.job_token);
      !s.ok()) {
    return s;
  }
  return socket;
}

void PlaneConnections::Release(Socket socket) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(socket));
}

}  // namespace tessera
