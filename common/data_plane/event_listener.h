// Accepts the data plane's connections and serves any number of them from
// a fixed pool of threads (issue #46): the pool's threads run one epoll
// loop (Boost.Asio's io_context; one thread at a time waits in epoll) and
// the work it makes ready, and a connection holds a thread only while a
// request of its own is being served. An idle connection costs a
// descriptor and a few kilobytes, not a thread and its stack, so a server
// holds thousands of workers with the pool's threads alone.
//
// Each connection runs the same steps as on Listener: with TLS, the clear
// greeting and the TLS handshake, then the token handshake
// (handshake.h); its answer is waited for without a thread, and a client
// that never sends it is dropped after `handshake_timeout_s`. Then, each
// time its next request's header has arrived, a pool thread runs
// `ServeOne` on it: the request read, served and answered with plain
// blocking calls (the socket's own timeout bounds each), straight into and
// out of the shards as before. After a reply the next header is looked for
// at once (one non-blocking read): in a closed loop it is usually there,
// and the same thread serves it with no epoll wake-up; only a connection
// with nothing to read goes back to epoll. A connection's steps run on its
// own strand, one at a time.
//
// Small requests first: a request its connection calls small
// (PooledConnection::Small, from its header) is served at once by the
// thread that read its header, up to 16 in a row on one connection; a
// large one waits in ReadyQueues (ready_queues.h) for a pool thread's
// turn, which comes after the connections already found ready have had
// their headers read, so their small requests are served first. So on a
// busy pool a cheap request waits for a few headers, not for the large
// requests ahead of it, the way a woken thread of a thread per connection
// gets a core ahead of the busy ones. Large requests are not starved:
// once `small_per_large` small ones were served in a row while a large
// one waited, the next small one found is queued and the large one
// served (ReadyQueues' rule).
//
// Back-pressure: a connection is watched again only once its request has
// been served, so a client that sends faster than the pool applies finds
// the kernel's socket buffers full and TCP holds it back; it cannot take
// more than one pool thread, and one that has its next request ready goes
// to the back of the pool's queue, behind the others. A request that
// stalls mid-way holds its pool thread until the socket's timeout.
//
// Descriptors: a connection the process has no descriptor for is refused
// with RESOURCE_EXHAUSTED to its client (descriptor_limit.h).
//
// Thread safety: the destructor stops everything; nothing else mutates.
#ifndef TESSERA_COMMON_DATA_PLANE_EVENT_LISTENER_H_
#define TESSERA_COMMON_DATA_PLANE_EVENT_LISTENER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"

namespace tessera {

struct EventListenerOptions {
  // Where to listen ("" or "::" every interface; port 0: the kernel's
  // choice, see port()).
  std::string host;
  int port = 0;
  // Pool threads (the epoll loop and the requests); 0: one per core (at
  // least 2).
  int threads = 0;
  // Proven by every connection (handshake.h); empty: none asked.
  std::string job_token;
  // Every connection runs TLS with it; null: plain TCP.
  std::shared_ptr<const DataPlaneTls> tls;
  // Bounds the TLS and token handshakes, including the wait for the
  // client's answer.
  double handshake_timeout_s = 30;
  // The socket timeout while a request is served (no progress for this
  // long closes the connection).
  double timeout_s = 120;
  // Small requests served per large one while both wait (above); at
  // least 1 (Start refuses less).
  int small_per_large = 2;
};

// What a server keeps per connection.
class PooledConnection {
 public:
  virtual ~PooledConnection() = default;
  // Runs on a pool thread once the connection's next request's first
  // kFrameHeaderBytes (frame.h) have been read into `head`: reads the rest
  // of the request, serves it and answers it. False when the connection
  // must close (it broke, or the peer does not speak the protocol); never
  // runs concurrently with itself. What it needs only while a request is
  // served belongs to the pool thread, not the connection (thousands of
  // idle connections hold no buffers).
  virtual bool ServeOne(Socket& socket, const char* head) = 0;
  // Whether the request whose first kFrameHeaderBytes are `head` is cheap
  // to serve (the pool serves small requests ahead of large ones, above).
  // Runs on a pool thread, before ServeOne, and must only look at `head`;
  // a header it cannot make sense of may be called either (ServeOne
  // refuses it). By default every request is small: served in the order
  // they became ready.
  virtual bool Small(const char* head) { return true; }
};

class EventListener {
 public:
  // Makes the state of a connection that passed its handshakes.
  using NewConnection = std::function<std::unique_ptr<PooledConnection>()>;

  // UNAVAILABLE naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<EventListener>> Start(
      EventListenerOptions options, NewConnection new_connection);

  EventListener(const EventListener&) = delete;
  EventListener& operator=(const EventListener&) = delete;
  // Stops accepting, shuts every connection down and joins every thread:
  // once it returns, no ServeOne runs.
  ~EventListener();

  int port() const;
  // The pool's size.
  int threads() const;
  // Connections accepted so far (refused ones not counted).
  int64_t accepted() const;

  class Impl;

 private:
  explicit EventListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_EVENT_LISTENER_H_
