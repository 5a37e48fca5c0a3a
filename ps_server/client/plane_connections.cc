#include "ps_server/client/plane_connections.h"

#include "absl/strings/str_cat.h"
#include "common/data_plane/handshake.h"

namespace tessera {

PlaneLease::~PlaneLease() {
  if (owner_ != nullptr && !extra_) owner_->Lost();
}

PlaneLease& PlaneLease::operator=(PlaneLease&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->Lost();
    owner_ = other.owner_;
    extra_ = other.extra_;
    Socket::operator=(std::move(other));
    other.owner_ = nullptr;
  }
  return *this;
}

PlaneConnections::PlaneConnections(PlaneConnectionOptions options)
    : options_(std::move(options)) {}

absl::Status PlaneConnections::Prefixed(const char* call,
                                        const absl::Status& s) const {
  return absl::Status(
      s.code(), absl::StrCat(options_.peer, " ", call, ": ", s.message()));
}

absl::StatusOr<PlaneLease> PlaneConnections::Acquire() {
  std::optional<Socket> idle;
  bool extra = false;
  {
    absl::MutexLock lock(&mu_);
    // This thread holds the lease: waiting would be for itself.
    extra = leased_ && holder_ == std::this_thread::get_id();
    if (!extra) {
      mu_.Await(absl::Condition(
          +[](bool* leased) { return !*leased; }, &leased_));
      leased_ = true;
      holder_ = std::this_thread::get_id();
      idle.swap(idle_);
    }
  }
  if (extra) {
    absl::StatusOr<Socket> socket = Connect();
    if (!socket.ok()) return socket.status();
    return PlaneLease(this, *std::move(socket), /*extra=*/true);
  }
  // A server that restarted closed it: connect again.
  if (idle.has_value() && idle->IdleAndOpen()) {
    return PlaneLease(this, *std::move(idle), /*extra=*/false);
  }
  idle.reset();
  absl::StatusOr<Socket> socket = Connect();
  if (!socket.ok()) {
    Lost();
    return socket.status();
  }
  return PlaneLease(this, *std::move(socket), /*extra=*/false);
}

absl::StatusOr<Socket> PlaneConnections::Connect() {
  absl::StatusOr<int> port = options_.resolve_port();
  if (!port.ok()) return port.status();
  if (*port <= 0) {
    return absl::UnavailableError(
        "the server announces no data plane (restarted with TLS?)");
  }
  absl::StatusOr<Socket> socket =
      Socket::Connect(options_.host, *port, options_.timeout_s);
  if (!socket.ok()) return socket.status();
  {
    absl::MutexLock lock(&mu_);
    ++connects_;
  }
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

void PlaneConnections::Release(PlaneLease lease) {
  if (lease.extra_) return;  // closed as it goes
  absl::MutexLock lock(&mu_);
  idle_.emplace(std::move(static_cast<Socket&>(lease)));
  lease.owner_ = nullptr;
  leased_ = false;
  holder_ = std::thread::id();
}

void PlaneConnections::Lost() {
  absl::MutexLock lock(&mu_);
  leased_ = false;
  holder_ = std::thread::id();
}

int64_t PlaneConnections::connects() const {
  absl::MutexLock lock(&mu_);
  return connects_;
}

}  // namespace tessera
