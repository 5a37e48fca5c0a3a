#ifndef TESSERA_BENCH_TCP_REFERENCE_H_
#define TESSERA_BENCH_TCP_REFERENCE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {
namespace bench {

// The raw-TCP reference of the transport bench: one connected client
// socket and a server, both with TCP_NODELAY. It moves the same payloads as
// a parameter server's dense push and pull with nothing on top: no framing
// beyond a 9-byte request header, no serialisation, no copies beyond the
// kernel's.
//
//   Push(n): the client sends a request header and n bytes in one writev;
//            the server reads them into a reused buffer and answers a
//            1-byte ack, which the client waits for.
//   Pull(n): the client sends a request header; the server writes n bytes
//            from a reused buffer; the client reads them into a reused
//            buffer.
//
// The server is either in the same process on 127.0.0.1 (Start) or a
// TcpReferenceServer elsewhere, e.g. in another network namespace
// (Connect). All buffers are allocated (and touched) once, at max_bytes.
//
// Thread safety: Push and Pull must not be called concurrently.
class TcpReferenceServer;
class TcpReference {
 public:
  // A server thread on 127.0.0.1 (an ephemeral port) and a client of it.
  // socket_buffer_bytes > 0 sets SO_SNDBUF/SO_RCVBUF on both ends (which
  // turns off the kernel's autotuning); 0 keeps the system defaults.
  static absl::StatusOr<std::unique_ptr<TcpReference>> Start(
      int64_t max_bytes, int socket_buffer_bytes = 0);

  // A client of the TcpReferenceServer at host:port (an IPv4 address),
  // which must take requests of max_bytes.
  static absl::StatusOr<std::unique_ptr<TcpReference>> Connect(
      const std::string& host, int port, int64_t max_bytes,
      int socket_buffer_bytes = 0);

  TcpReference(const TcpReference&) = delete;
  TcpReference& operator=(const TcpReference&) = delete;
  // Tells the server this client is done (it ends its connection) and,
  // after Start, stops the server thread.
  ~TcpReference();

  // REQUIRES: 0 < bytes <= max_bytes.
  absl::Status Push(int64_t bytes);
  absl::Status Pull(int64_t bytes);

 private:
  explicit TcpReference(int64_t max_bytes);

  const int64_t max_bytes_;
  int client_fd_ = -1;
  std::vector<char> client_send_;
  std::vector<char> client_recv_;
  std::unique_ptr<TcpReferenceServer> server_;  // after Start only
};

// The server half: a thread that accepts one client on host:port and
// answers its pushes and pulls until it says it is done or closes.
//
// Thread safety: Wait and the destructor must not run concurrently.
class TcpReferenceServer {
 public:
  // host: an IPv4 address; port 0 lets the kernel choose.
  static absl::StatusOr<std::unique_ptr<TcpReferenceServer>> Listen(
      const std::string& host, int port, int64_t max_bytes,
      int socket_buffer_bytes = 0);

  TcpReferenceServer(const TcpReferenceServer&) = delete;
  TcpReferenceServer& operator=(const TcpReferenceServer&) = delete;
  // Ends the connection (or the wait for one) and joins the thread.
  ~TcpReferenceServer();

  int port() const { return port_; }

  // Blocks until a client has come and gone; the error that ended its
  // connection, if one did.
  absl::Status Wait();

 private:
  TcpReferenceServer(int64_t max_bytes, int socket_buffer_bytes);
  absl::Status Serve();

  const int64_t max_bytes_;
  const int socket_buffer_bytes_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<char> buffer_;
  std::mutex mu_;
  int connection_fd_ = -1;  // guarded by mu_; owned by the thread
  bool stopping_ = false;   // guarded by mu_
  absl::Status result_;     // set by the thread before it ends
  std::thread thread_;
};

}  // namespace bench
}  // namespace tessera

#endif  // TESSERA_BENCH_TCP_REFERENCE_H_
