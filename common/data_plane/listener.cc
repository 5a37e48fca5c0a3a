#include "common/data_plane/listener.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace tessera {

absl::StatusOr<int> OpenListeningSocket(const std::string& host, int port,
                                        int* bound_port) {
  const std::string where = absl::StrCat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const char* node = host.empty() ? nullptr : host.c_str();
  if (int rc = getaddrinfo(node, std::to_string(port).c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("data plane: cannot listen on ",
                                               where, ": ", gai_strerror(rc)));
  }
  // Prefer IPv6 for a wildcard: one dual-stack socket takes both families.
  addrinfo* chosen = found;
  for (addrinfo* ai = found; node == nullptr && ai != nullptr;
       ai = ai->ai_next) {
    if (ai->ai_family == AF_INET6) chosen = ai;
  }
  const int fd = socket(chosen->ai_family, chosen->ai_socktype | SOCK_CLOEXEC,
                        chosen->ai_protocol);
  if (fd < 0) {
    freeaddrinfo(found);
    return absl::UnavailableError(absl::StrCat("data plane: socket for ", where,
                                               ": ", std::strerror(errno)));
  }
  const int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (chosen->ai_family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  if (bind(fd, chosen->ai_addr, chosen->ai_addrlen) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    freeaddrinfo(found);
    close(fd);
    return absl::UnavailableError(absl::StrCat(
        "data plane: cannot listen on ", where, ": ", std::strerror(err)));
  }
  freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  *bound_port = bound.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                    : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

absl::StatusOr<std::unique_ptr<Listener>> Listener::Start(
    const std::string& host, int port, Serve serve,
    std::shared_ptr<const DataPlaneTls> tls, double tls_timeout_s) {
  int chosen_port = 0;
  absl::StatusOr<int> fd = OpenListeningSocket(host, port, &chosen_port);
  if (!fd.ok()) return fd.status();
  // Accepts only after poll says a connection waits; non-blocking, so one
  // that went away meanwhile (or a refusal's second accept) never blocks.
  fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK);
  std::unique_ptr<Listener> listener(new Listener(
      *fd, chosen_port, std::move(serve), std::move(tls), tls_timeout_s));
  if (pipe2(listener->wake_, O_CLOEXEC) != 0) {
    return absl::InternalError("data plane: no pipe for the listener");
  }
  listener->accept_ = std::thread([l = listener.get()] { l->AcceptLoop(); });
  return listener;
}

Listener::Listener(int fd, int port, Serve serve,
                   std::shared_ptr<const DataPlaneTls> tls,
                   double tls_timeout_s)
    : fd_(fd),
      port_(port),
      serve_(std::move(serve)),
      tls_(std::move(tls)),
      tls_timeout_s_(tls_timeout_s) {}

Listener::~Listener() {
  if (wake_[1] >= 0) {
    const char byte = 0;
    ssize_t ignored = write(wake_[1], &byte, 1);
    (void)ignored;
  }
  if (accept_.joinable()) accept_.join();
  std::list<Connection> ending;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (Connection& c : connections_) c.socket.Shutdown();
    ending.splice(ending.end(), connections_);
  }
  for (Connection& c : ending) {
    if (c.thread.joinable()) c.thread.join();
  }
  close(fd_);
  for (int end : wake_) {
    if (end >= 0) close(end);
  }
}

void Listener::Reap() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void Listener::AcceptLoop() {
  while (true) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LOG(ERROR) << "data plane listener: poll: " << std::strerror(errno);
      return;
    }
    if (p[1].revents != 0) return;
    const int client = AcceptOrRefuse(fd_, &spare_);
    if (client < 0) {
      if (errno == EMFILE) {
        LOG_EVERY_N(WARNING, 100)
            << "data plane listener: no descriptor left: a connection was "
               "refused (RESOURCE_EXHAUSTED to its client)";
        // Without a spare nothing drained the backlog: wait a little
        // rather than spin on a listening socket that stays readable.
        if (!spare_.held()) poll(nullptr, 0, 100);
      } else if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        LOG(WARNING) << "data plane listener: accept: " << std::strerror(errno);
      }
      continue;
    }
    const int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    absl::MutexLock lock(&mu_);
    Reap();
    if (stopping_) {
      close(client);
      return;
    }
    accepted_.fetch_add(1);
    connections_.emplace_back();
    Connection* c = &connections_.back();
    c->socket = Socket(client);
    c->thread = std::thread([this, c] {
      absl::Status tls =
          tls_ ? tls_->Accept(c->socket, tls_timeout_s_) : absl::OkStatus();
      if (tls.ok()) {
        serve_(c->socket);
      } else {
        LOG(WARNING) << "data plane: TLS refused a connection: " << tls;
      }
      absl::MutexLock done_lock(&mu_);
      c->socket.Close();
      c->done = true;
    });
  }
}

}  // namespace tessera
