// Accepts the data plane's TCP connections and serves each on a thread of
// its own. Connections are few and long-lived (one per worker per server,
// plus one per concurrent call), so a thread each keeps every transfer a
// plain blocking read or write straight into its destination.
//
// Thread safety: the destructor stops everything; nothing else mutates.
#ifndef TESSERA_COMMON_DATA_PLANE_LISTENER_H_
#define TESSERA_COMMON_DATA_PLANE_LISTENER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/data_plane/descriptor_limit.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"

namespace tessera {

// A listening TCP socket on host:port ("::" or "" every interface,
// dual-stack; port 0: one the kernel picks, set in *bound_port), with a
// backlog of SOMAXCONN so a burst of workers connecting at once is not
// dropped. UNAVAILABLE naming the address when it cannot. The caller owns
// the descriptor.
absl::StatusOr<int> OpenListeningSocket(const std::string& host, int port,
                                        int* bound_port);

class Listener {
 public:
  // Called on a connection's own thread; the connection closes when it
  // returns. It must return once the socket fails (the destructor shuts
  // every connection down to end it).
  using Serve = std::function<void(Socket&)>;

  // Listens on host:port ("::" or "" every interface, dual-stack; port 0:
  // one the kernel picks, see port()). UNAVAILABLE naming the address when
  // it cannot. With `tls` (a server's), every connection is TLS: its
  // handshake runs on the connection's thread (bounded by
  // `tls_timeout_s`) before `serve` gets the socket, and a connection it
  // refuses is logged and closed.
  static absl::StatusOr<std::unique_ptr<Listener>> Start(
      const std::string& host, int port, Serve serve,
      std::shared_ptr<const DataPlaneTls> tls = nullptr,
      double tls_timeout_s = 30);

  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  // Stops accepting, shuts down every open connection and joins all
  // threads: once it returns, `serve` runs no more.
  ~Listener();

  int port() const { return port_; }
  // Connections accepted so far (refused ones not counted).
  int64_t accepted() const { return accepted_.load(); }

 private:
  struct Connection {
    Socket socket;
    std::thread thread;
    bool done = false;
  };

  Listener(int fd, int port, Serve serve,
           std::shared_ptr<const DataPlaneTls> tls, double tls_timeout_s);
  void AcceptLoop();
  // Joins the threads of connections that ended.
  void Reap() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fd_;
  const int port_;
  const Serve serve_;
  const std::shared_ptr<const DataPlaneTls> tls_;
  const double tls_timeout_s_;
  int wake_[2] = {-1, -1};  // a pipe that ends the accept loop
  SpareDescriptor spare_;   // refuses a connection when none is left
  absl::Mutex mu_;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> accepted_{0};
  std::thread accept_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_LISTENER_H_
