#include "common/data_plane/event_listener.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/bind_executor.hpp"
#include "boost/asio/defer.hpp"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/posix/stream_descriptor.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "common/data_plane/descriptor_limit.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/listener.h"
#include "common/data_plane/ready_queues.h"
#include "glog/logging.h"

namespace tessera {
namespace {

namespace asio = boost::asio;
using ErrorCode = boost::system::error_code;

constexpr auto kWaitRead = asio::posix::descriptor_base::wait_read;

// One connection. Everything it does runs on its strand, so one thing at
// a time: the handshake, a request, or arming the wait for the next one;
// the pool's threads take whichever connection's work is ready.
struct Conn {
  Conn(asio::io_context& io, int fd, std::string token)
      : strand(asio::make_strand(io)),
        socket(fd),
        wait(io),
        timer(io),
        handshake(std::move(token)) {}

  asio::strand<asio::io_context::executor_type> strand;
  Socket socket;
  // Watches socket.fd() for the reactor; released before the socket
  // closes, so the descriptor is closed once, by the socket.
  asio::posix::stream_descriptor wait;
  asio::steady_timer timer;
  bool answered = false;         // the wait's handler ran
  bool kicked = false;           // readable already when the wait was queued
  bool timed_out = false;        // no handshake answer in time
  bool blocking = false;         // Asio's O_NONBLOCK undone (see Arm)
  char head[kFrameHeaderBytes];  // the next request's header
  DataPlaneHandshakeServer handshake;
  std::unique_ptr<PooledConnection> served;
};

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(s, 0.001)));
}

// Asio makes a descriptor non-blocking when it first waits on it; the
// pool serves requests with blocking calls bounded by the socket's
// timeout, so the first wait hands the connection back in blocking mode
// (Asio remembers it set the mode, and does not set it again).
void MakeBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) != 0) {
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
}

// Bytes already received that no wait on the descriptor would announce
// (held in OpenSSL's buffers), or a request already waiting in the kernel.
bool ReadableNow(const Socket& socket) {
  if (socket.tls() && SSL_has_pending(socket.tls_session()) != 0) return true;
  pollfd p{socket.fd(), POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

// A connection serves at most this many small requests in a row on one
// pool thread before the others get their turn.
constexpr int kInlineRequests = 16;

enum class Got { kHeader, kNothing, kClosed };

// The next request's header into `head` if it has started to arrive,
// without waiting for it: one recv(MSG_DONTWAIT) on a plain socket (no
// poll, no switch of the descriptor's mode); with TLS, a look for bytes
// first. kClosed: the peer closed, or the connection broke.
Got TryHeader(Socket& socket, char* head) {
  size_t have = 0;
  if (socket.tls()) {
    if (!ReadableNow(socket)) return Got::kNothing;
  } else {
    ssize_t got;
    do {
      got = recv(socket.fd(), head, kFrameHeaderBytes, MSG_DONTWAIT);
    } while (got < 0 && errno == EINTR);
    if (got == 0) return Got::kClosed;
    if (got < 0) {
      return errno == EAGAIN || errno == EWOULDBLOCK ? Got::kNothing
                                                     : Got::kClosed;
    }
    have = static_cast<size_t>(got);
  }
  // The rest is on its way: the socket's timeout bounds the wait.
  if (have < kFrameHeaderBytes &&
      !socket.ReadFull(head + have, kFrameHeaderBytes - have).ok()) {
    return Got::kClosed;
  }
  return Got::kHeader;
}

}  // namespace

class EventListener::Impl {
 public:
  Impl(EventListenerOptions options, NewConnection new_connection, int fd,
       int port, int threads)
      : options_(std::move(options)),
        new_connection_(std::move(new_connection)),
        port_(port),
        threads_(threads),
        acceptor_(io_, fd),
        accept_backoff_(io_),
        work_(asio::make_work_guard(io_)),
        ready_(options_.small_per_large) {}

  // The pool: every thread runs the reactor's loop (one at a time waits in
  // epoll) and the handlers it makes ready, so the thread that saw a
  // connection become readable usually serves its request itself, with no
  // hand-over between threads.
  void Begin() {
    ArmAccept();
    for (int i = 0; i < threads_; ++i) {
      pool_.emplace_back([this] { io_.run(); });
    }
  }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_.store(true);
      // Wakes pool threads blocked on a socket, and makes every watched
      // one readable, so its owner sees `stopping_` and drops it.
      for (auto& [raw, conn] : conns_) conn->socket.Shutdown();
      auto none = [](absl::flat_hash_map<Conn*, std::shared_ptr<Conn>>* conns) {
        return conns->empty();
      };
      mu_.Await(absl::Condition(+none, &conns_));
    }
    asio::post(io_, [this] {
      ErrorCode ignored;
      acceptor_.close(ignored);
      accept_backoff_.cancel();
    });
    work_.reset();
    for (std::thread& t : pool_) t.join();
  }

  int port() const { return port_; }
  int threads() const { return threads_; }
  int64_t accepted() const { return accepted_.load(); }

 private:
  // Takes every connection waiting in the backlog (one wait at a time, so
  // never concurrently).
  void ArmAccept() {
    acceptor_.async_wait(kWaitRead, [this](const ErrorCode& ec) {
      if (ec || stopping_.load()) return;
      while (true) {
        const int fd = AcceptOrRefuse(acceptor_.native_handle(), &spare_);
        if (fd >= 0) {
          Adopt(fd);
          continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE) {
          LOG_EVERY_N(WARNING, 100)
              << "data plane: no descriptor left: a connection was refused "
                 "(RESOURCE_EXHAUSTED to its client)";
          if (spare_.held()) continue;
          // Nothing could drain the backlog: look again a little later
          // rather than spin on a listening socket that stays readable.
          accept_backoff_.expires_after(std::chrono::milliseconds(100));
          accept_backoff_.async_wait([this](const ErrorCode& e) {
            if (!e && !stopping_.load()) ArmAccept();
          });
          return;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          LOG(WARNING) << "data plane: accept: " << std::strerror(errno);
        }
        break;
      }
      ArmAccept();
    });
  }

  void Adopt(int fd) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto conn = std::make_shared<Conn>(io_, fd, options_.job_token);
    ErrorCode ec;
    conn->wait.assign(fd, ec);
    if (ec) {
      LOG(WARNING) << "data plane: cannot watch a connection: " << ec.message();
      conn->wait.release();
      return;  // the socket closes it
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_.load()) {
        conn->wait.release();
        return;
      }
      conns_.emplace(conn.get(), conn);
    }
    accepted_.fetch_add(1);
    asio::post(conn->strand, [this, conn] { Greet(conn); });
  }

  // On the strand: TLS, then the token handshake's greeting.
  void Greet(const std::shared_ptr<Conn>& conn) {
    if (stopping_.load()) return Drop(conn);
    conn->socket.SetTimeout(options_.handshake_timeout_s).IgnoreError();
    absl::Status s =
        options_.tls != nullptr
            ? options_.tls->Accept(conn->socket, options_.handshake_timeout_s)
            : absl::OkStatus();
    if (!s.ok()) {
      LOG(WARNING) << "data plane: TLS refused a connection: " << s;
      return Drop(conn);
    }
    s = conn->handshake.SendHello(conn->socket);
    if (!s.ok()) {
      LOG(WARNING) << "data plane: connection refused: " << s;
      return Drop(conn);
    }
    Arm(conn, Next::kAuthenticate);
  }

  enum class Next { kAuthenticate, kServe };

  // On the strand: waits, holding no thread, for the connection to be
  // readable, then does `next`; the handshake's answer is waited for at
  // most the handshake's timeout.
  //
  // Asio's epoll is edge-triggered and its waits do not look before they
  // wait: bytes that arrived while no wait was queued (the client's next
  // request, sent the moment it read the last reply) raise no new edge.
  // So once the wait is queued the socket is looked at once more, and a
  // readable one cancels its own wait, which its handler reads as ready.
  // The handlers run on the connection's strand, after this returns.
  void Arm(const std::shared_ptr<Conn>& conn, Next next) {
    if (stopping_.load()) return Drop(conn);
    conn->kicked = false;
    conn->timed_out = false;
    conn->answered = false;
    if (next == Next::kAuthenticate) {
      conn->timer.expires_after(Seconds(options_.handshake_timeout_s));
      conn->timer.async_wait(
          asio::bind_executor(conn->strand, [conn](const ErrorCode& ec) {
            if (!ec && !conn->answered) {
              conn->timed_out = true;
              conn->wait.cancel();
            }
          }));
    }
    auto ready = [this, conn, next](const ErrorCode& ec) {
      conn->answered = true;
      if (next == Next::kAuthenticate) conn->timer.cancel();
      const bool ready = !ec || (ec == asio::error::operation_aborted &&
                                 conn->kicked && !conn->timed_out);
      if (!ready || stopping_.load()) {
        if (conn->timed_out && !stopping_.load()) {
          LOG(WARNING) << "data plane: connection refused: no handshake "
                          "answer within "
                       << options_.handshake_timeout_s << " s";
        }
        return Drop(conn);
      }
      if (next == Next::kAuthenticate) {
        // Readiness is a hint: an edge reported before this wait was
        // queued may complete it with nothing to read, and a blocking read
        // then would hold a pool thread until the client's answer.
        if (!ReadableNow(conn->socket)) return Arm(conn, next);
        Authenticate(conn);
      } else {
        Continue(conn);
      }
    };
    conn->wait.async_wait(kWaitRead,
                          asio::bind_executor(conn->strand, std::move(ready)));
    if (!conn->blocking) {
      // Asio made the descriptor non-blocking as it queued its first wait,
      // once: requests are served with blocking calls bounded by the
      // socket's timeout, and the next header is tried with MSG_DONTWAIT.
      MakeBlocking(conn->socket.fd());
      conn->blocking = true;
    }
    if (ReadableNow(conn->socket)) {
      conn->kicked = true;
      conn->wait.cancel();
    }
  }

  // On the strand.
  void Authenticate(const std::shared_ptr<Conn>& conn) {
    if (stopping_.load()) return Drop(conn);
    if (absl::Status s = conn->handshake.Finish(conn->socket); !s.ok()) {
      LOG(WARNING) << "data plane: connection refused: " << s;
      return Drop(conn);
    }
    conn->socket.SetTimeout(options_.timeout_s).IgnoreError();
    conn->served = new_connection_();
    Continue(conn);
  }

  // On the strand: serves the connection's next request if its header is
  // here already, else waits for it without a thread.
  void Continue(const std::shared_ptr<Conn>& conn) {
    if (stopping_.load()) return Drop(conn);
    switch (TryHeader(conn->socket, conn->head)) {
      case Got::kHeader:
        if (!conn->served->Small(conn->head)) return Queue(conn, false);
        if (!ready_.MayServeSmall()) return Queue(conn, true);
        return Serve(conn);
      case Got::kNothing:
        return Arm(conn, Next::kServe);
      case Got::kClosed:
        return Drop(conn);
    }
  }

  // On the strand, with the request's header in conn->head. In a closed
  // loop the client's next request is usually in the socket by the time
  // the last one's reply is written, so a small one is served at once on
  // this thread (no epoll wake-up, no hand-over), up to kInlineRequests in
  // a row; a large one, or a small one past those, goes to the ready
  // queues, behind the others.
  void Serve(const std::shared_ptr<Conn>& conn) {
    for (int served = 1;; ++served) {
      if (stopping_.load() ||
          !conn->served->ServeOne(conn->socket, conn->head)) {
        return Drop(conn);
      }
      switch (TryHeader(conn->socket, conn->head)) {
        case Got::kHeader: {
          const bool small = conn->served->Small(conn->head);
          if (small && served < kInlineRequests && ready_.MayServeSmall()) {
            continue;
          }
          return Queue(conn, small);
        }
        case Got::kNothing:
          return Arm(conn, Next::kServe);
        case Got::kClosed:
          return Drop(conn);
      }
    }
  }

  // On the strand, as its last step, with the request's header in
  // conn->head: one entry in the ready queues and one turn in the pool's
  // queue to take an entry (not necessarily this one: the one the rule
  // picks). The turn is deferred (a continuation of this handler: no
  // thread is woken for it, and it joins the pool's queue once this
  // handler returns), so the connections found ready before it, whose
  // small requests go first, are looked at before it is taken.
  void Queue(const std::shared_ptr<Conn>& conn, bool small) {
    ready_.Push(conn, small);
    asio::defer(io_, [this] { ServeNext(); });
  }

  // A pool thread's turn: serves the connection the rule picks, on its
  // strand (idle: nothing else of a queued connection is pending, so the
  // dispatch runs it here and now).
  void ServeNext() {
    std::optional<std::shared_ptr<Conn>> next = ready_.Take();
    if (!next.has_value()) return;
    std::shared_ptr<Conn> conn = *std::move(next);
    auto& strand = conn->strand;
    asio::dispatch(strand, [this, conn = std::move(conn)] { Serve(conn); });
  }

  // The owner ends the connection.
  // Leaves the set first, so Stop no longer shuts the socket down while
  // it closes; Stop joins the threads that may still be here.
  void Drop(const std::shared_ptr<Conn>& conn) {
    {
      absl::MutexLock lock(&mu_);
      conns_.erase(conn.get());
    }
    conn->wait.release();
    conn->served.reset();
    conn->socket.Close();
  }

  const EventListenerOptions options_;
  const NewConnection new_connection_;
  const int port_;
  const int threads_;
  // First among the Asio objects: destroyed after everything that uses
  // it.
  asio::io_context io_;
  asio::posix::stream_descriptor acceptor_;  // owns the listening socket
  asio::steady_timer accept_backoff_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>>
      work_;
  std::vector<std::thread> pool_;
  SpareDescriptor spare_;  // the accepting handler's
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> accepted_{0};
  absl::Mutex mu_;
  absl::flat_hash_map<Conn*, std::shared_ptr<Conn>> conns_ ABSL_GUARDED_BY(mu_);
  // Connections whose next request's header was read, waiting for a pool
  // thread; as many entries as turns queued in io_.
  ReadyQueues<std::shared_ptr<Conn>> ready_;
};

absl::StatusOr<std::unique_ptr<EventListener>> EventListener::Start(
    EventListenerOptions options, NewConnection new_connection) {
  if (options.small_per_large < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("EventListenerOptions::small_per_large must be at least "
                     "1, not ",
                     options.small_per_large));
  }
  int port = 0;
  absl::StatusOr<int> fd =
      OpenListeningSocket(options.host, options.port, &port);
  if (!fd.ok()) return fd.status();
  fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK);
  int threads = options.threads;
  if (threads <= 0) {
    threads =
        std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  }
  auto impl = std::make_unique<Impl>(
      std::move(options), std::move(new_connection), *fd, port, threads);
  impl->Begin();
  return std::unique_ptr<EventListener>(new EventListener(std::move(impl)));
}

EventListener::EventListener(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

EventListener::~EventListener() { impl_->Stop(); }

int EventListener::port() const { return impl_->port(); }

int EventListener::threads() const { return impl_->threads(); }

int64_t EventListener::accepted() const { return impl_->accepted(); }

}  // namespace tessera
