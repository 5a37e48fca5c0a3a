#include "bench/tcp_reference.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace bench {
namespace {

constexpr char kPush = 'P';
constexpr char kPull = 'L';
constexpr char kQuit = 'Q';
constexpr size_t kHeaderBytes = 1 + sizeof(uint64_t);

absl::Status Errno(const char* what) {
  return absl::InternalError(
      absl::StrCat("tcp reference: ", what, ": ", std::strerror(errno)));
}

// Sends every byte of iov[0..count), however the kernel splits it.
absl::Status SendAll(int fd, struct iovec* iov, int count) {
  while (count > 0) {
    struct msghdr msg = {};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return Errno("send");
    }
    size_t left = static_cast<size_t>(sent);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return absl::OkStatus();
}

absl::Status SendAll(int fd, const void* data, size_t bytes) {
  struct iovec iov = {const_cast<void*>(data), bytes};
  return SendAll(fd, &iov, 1);
}

absl::Status RecvAll(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t got = recv(fd, p, bytes, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Errno("recv");
    }
    if (got == 0) {
      return absl::UnavailableError(
          "tcp reference: the peer closed the socket");
    }
    p += got;
    bytes -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

void EncodeHeader(char op, int64_t bytes, char* header) {
  const uint64_t n = static_cast<uint64_t>(bytes);
  header[0] = op;
  std::memcpy(header + 1, &n, sizeof(n));
}

absl::Status SetOptions(int fd, int socket_buffer_bytes) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return Errno("TCP_NODELAY");
  }
  if (socket_buffer_bytes > 0) {
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &socket_buffer_bytes,
                   sizeof(socket_buffer_bytes)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &socket_buffer_bytes,
                   sizeof(socket_buffer_bytes)) != 0) {
      return Errno("SO_SNDBUF/SO_RCVBUF");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<struct sockaddr_in> Ipv4Address(const std::string& host,
                                               int port) {
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (port < 0 || port > 65535 ||
      inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp reference: expected an IPv4 address and a port, got ",
                     host, ":", port));
  }
  return addr;
}

}  // namespace

TcpReference::TcpReference(int64_t max_bytes)
    : max_bytes_(max_bytes),
      client_send_(max_bytes, 'x'),
      client_recv_(max_bytes, 0) {}

absl::StatusOr<std::unique_ptr<TcpReference>> TcpReference::Start(
    int64_t max_bytes, int socket_buffer_bytes) {
  absl::StatusOr<std::unique_ptr<TcpReferenceServer>> server =
      TcpReferenceServer::Listen("127.0.0.1", 0, max_bytes,
                                 socket_buffer_bytes);
  if (!server.ok()) return server.status();
  absl::StatusOr<std::unique_ptr<TcpReference>> client =
      Connect("127.0.0.1", (*server)->port(), max_bytes, socket_buffer_bytes);
  if (!client.ok()) return client.status();
  (*client)->server_ = *std::move(server);
  return client;
}

absl::StatusOr<std::unique_ptr<TcpReference>> TcpReference::Connect(
    const std::string& host, int port, int64_t max_bytes,
    int socket_buffer_bytes) {
  if (max_bytes <= 0) {
    return absl::InvalidArgumentError("tcp reference: max_bytes must be > 0");
  }
  absl::StatusOr<struct sockaddr_in> addr = Ipv4Address(host, port);
  if (!addr.ok()) return addr.status();
  std::unique_ptr<TcpReference> ref(new TcpReference(max_bytes));
  ref->client_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ref->client_fd_ < 0) return Errno("socket");
  if (absl::Status s = SetOptions(ref->client_fd_, socket_buffer_bytes);
      !s.ok()) {
    return s;
  }
  if (connect(ref->client_fd_, reinterpret_cast<const struct sockaddr*>(&*addr),
              sizeof(*addr)) != 0) {
    return Errno(absl::StrCat("connect to ", host, ":", port).c_str());
  }
  return ref;
}

TcpReference::~TcpReference() {
  if (client_fd_ >= 0) {
    char header[kHeaderBytes];
    EncodeHeader(kQuit, 0, header);
    (void)SendAll(client_fd_, header, sizeof(header));  // best effort
    // Closing also unblocks a server stuck in a send after a failed call.
    close(client_fd_);
  }
  server_.reset();
}

absl::Status TcpReference::Push(int64_t bytes) {
  if (bytes <= 0 || bytes > max_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp reference: push of ", bytes, " bytes"));
  }
  char header[kHeaderBytes];
  EncodeHeader(kPush, bytes, header);
  struct iovec iov[2] = {{header, sizeof(header)},
                         {client_send_.data(), static_cast<size_t>(bytes)}};
  if (absl::Status s = SendAll(client_fd_, iov, 2); !s.ok()) return s;
  char ack = 0;
  return RecvAll(client_fd_, &ack, 1);
}

absl::Status TcpReference::Pull(int64_t bytes) {
  if (bytes <= 0 || bytes > max_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp reference: pull of ", bytes, " bytes"));
  }
  char header[kHeaderBytes];
  EncodeHeader(kPull, bytes, header);
  if (absl::Status s = SendAll(client_fd_, header, sizeof(header)); !s.ok()) {
    return s;
  }
  return RecvAll(client_fd_, client_recv_.data(), bytes);
}

TcpReferenceServer::TcpReferenceServer(int64_t max_bytes,
                                       int socket_buffer_bytes)
    : max_bytes_(max_bytes),
      socket_buffer_bytes_(socket_buffer_bytes),
      buffer_(max_bytes, 'y') {}

absl::StatusOr<std::unique_ptr<TcpReferenceServer>> TcpReferenceServer::Listen(
    const std::string& host, int port, int64_t max_bytes,
    int socket_buffer_bytes) {
  if (max_bytes <= 0) {
    return absl::InvalidArgumentError("tcp reference: max_bytes must be > 0");
  }
  absl::StatusOr<struct sockaddr_in> addr = Ipv4Address(host, port);
  if (!addr.ok()) return addr.status();
  std::unique_ptr<TcpReferenceServer> server(
      new TcpReferenceServer(max_bytes, socket_buffer_bytes));
  server->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server->listen_fd_ < 0) return Errno("socket");
  const int one = 1;
  setsockopt(server->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // Set before listen() so the accepted socket inherits them.
  if (absl::Status s = SetOptions(server->listen_fd_, socket_buffer_bytes);
      !s.ok()) {
    return s;
  }
  if (bind(server->listen_fd_, reinterpret_cast<const struct sockaddr*>(&*addr),
           sizeof(*addr)) != 0) {
    return Errno(absl::StrCat("bind ", host, ":", port).c_str());
  }
  if (listen(server->listen_fd_, 1) != 0) return Errno("listen");
  struct sockaddr_in bound = {};
  socklen_t len = sizeof(bound);
  if (getsockname(server->listen_fd_,
                  reinterpret_cast<struct sockaddr*>(&bound), &len) != 0) {
    return Errno("getsockname");
  }
  server->port_ = ntohs(bound.sin_port);
  server->thread_ =
      std::thread([s = server.get()] { s->result_ = s->Serve(); });
  return server;
}

TcpReferenceServer::~TcpReferenceServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    // Unblocks accept() or a recv()/send() on the connection.
    if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
    if (connection_fd_ >= 0) shutdown(connection_fd_, SHUT_RDWR);
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

absl::Status TcpReferenceServer::Wait() {
  if (thread_.joinable()) thread_.join();
  return result_;
}

absl::Status TcpReferenceServer::Serve() {
  int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return Errno("accept");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      close(fd);
      return absl::CancelledError("tcp reference server: stopped");
    }
    connection_fd_ = fd;
  }
  absl::Status status = SetOptions(fd, socket_buffer_bytes_);
  while (status.ok()) {
    char header[kHeaderBytes];
    status = RecvAll(fd, header, sizeof(header));
    if (!status.ok()) break;
    uint64_t n = 0;
    std::memcpy(&n, header + 1, sizeof(n));
    if (header[0] == kQuit) break;
    if (n == 0 || n > static_cast<uint64_t>(max_bytes_)) {
      status = absl::InvalidArgumentError(
          absl::StrCat("tcp reference server: request of ", n,
                       " bytes (at most ", max_bytes_, ")"));
      break;
    }
    if (header[0] == kPush) {
      status = RecvAll(fd, buffer_.data(), n);
      if (!status.ok()) break;
      const char ack = 'a';
      status = SendAll(fd, &ack, 1);
    } else if (header[0] == kPull) {
      status = SendAll(fd, buffer_.data(), n);
    } else {
      status = absl::InvalidArgumentError(
          absl::StrCat("tcp reference server: unknown request ",
                       static_cast<int>(header[0])));
    }
  }
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
  }
  // The client sees EOF (or a reset) on its next call and reports it.
  {
    std::lock_guard<std::mutex> lock(mu_);
    connection_fd_ = -1;
  }
  close(fd);
  return status;
}

}  // namespace bench
}  // namespace tessera
