#include "ps_server/client/plane_connections.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/data_plane/handshake.h"

namespace tessera {

PlaneCall& PlaneCall::operator=(PlaneCall&& other) noexcept {
  if (this != &other) {
    Abandon();
    owner_ = other.owner_;
    call_ = other.call_;
    error_ = std::move(other.error_);
    channel_ = std::move(other.channel_);
    entry_ = std::move(other.entry_);
  }
  return *this;
}

PlaneCall::~PlaneCall() { Abandon(); }

void PlaneCall::Abandon() {
  if (entry_ != nullptr) channel_->Abandon(entry_);
  entry_ = nullptr;
  channel_ = nullptr;
}

absl::Status PlaneCall::Finish() {
  if (entry_ == nullptr) {
    return error_.ok() ? absl::FailedPreconditionError("finished twice")
                       : error_;
  }
  absl::Status s = channel_->Wait(entry_);
  entry_ = nullptr;
  channel_ = nullptr;
  return s.ok() ? s : owner_->Prefixed(call_, s);
}

PlaneConnections::PlaneConnections(PlaneConnectionOptions options)
    : options_(std::move(options)) {}

absl::Status PlaneConnections::Prefixed(const char* call,
                                        const absl::Status& s) const {
  return absl::Status(
      s.code(), absl::StrCat(options_.peer, " ", call, ": ", s.message()));
}

PlaneCall PlaneConnections::Send(const char* call,
                                 absl::Span<const iovec> request,
                                 PlaneReplyReader reader, bool awaited) {
  // A connection found closed before anything was written costs the call
  // nothing: it goes on a new one (once; a server that closes every new
  // connection at once gets the error).
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<std::shared_ptr<PlaneChannel>> channel = Channel();
    if (!channel.ok()) {
      return PlaneCall(this, call, Prefixed(call, channel.status()));
    }
    bool sent = false;
    absl::StatusOr<std::shared_ptr<PlaneChannel::Entry>> entry =
        (*channel)->Send(request, std::move(reader), awaited, &sent);
    if (entry.ok()) {
      return PlaneCall(this, call, *std::move(channel), *std::move(entry));
    }
    if (sent || attempt > 0) {
      return PlaneCall(this, call, Prefixed(call, entry.status()));
    }
  }
}

absl::StatusOr<std::shared_ptr<PlaneChannel>> PlaneConnections::Channel() {
  absl::MutexLock lock(&mu_);
  if (channel_ != nullptr && !channel_->broken()) return channel_;
  // Calls still reading the broken one keep it alive; it closes with them.
  channel_ = nullptr;
  absl::StatusOr<Socket> socket = Connect();
  if (!socket.ok()) return socket.status();
  channel_ = std::make_shared<PlaneChannel>(*std::move(socket),
                                            options_.tls != nullptr);
  return channel_;
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
  ++connects_;
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

int64_t PlaneConnections::connects() const {
  absl::MutexLock lock(&mu_);
  return connects_;
}

}  // namespace tessera
