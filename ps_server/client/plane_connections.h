#ifndef TESSERA_PS_SERVER_CLIENT_PLANE_CONNECTIONS_H_
#define TESSERA_PS_SERVER_CLIENT_PLANE_CONNECTIONS_H_

#include <sys/uio.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"
#include "ps_server/client/plane_channel.h"

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

class PlaneConnections;

// One call on the connection: its request was sent (or it failed), and
// Finish reads its reply. Dropped unfinished, its reply is read into
// scratch by whoever reads next, and the connection stays in step.
class PlaneCall {
 public:
  // A call that failed before it was sent (`error`, already prefixed).
  explicit PlaneCall(absl::Status error)
      : owner_(nullptr), call_(""), error_(std::move(error)) {}
  PlaneCall(PlaneCall&& other) noexcept = default;
  PlaneCall& operator=(PlaneCall&& other) noexcept;
  PlaneCall(const PlaneCall&) = delete;
  ~PlaneCall();

  // Waits for the reply (reading it, and those before it, if no one else
  // is); the call's status, prefixed with the peer and the call. Once.
  absl::Status Finish();

 private:
  friend class PlaneConnections;
  PlaneCall(const PlaneConnections* owner, const char* call, absl::Status error)
      : owner_(owner), call_(call), error_(std::move(error)) {}
  PlaneCall(const PlaneConnections* owner, const char* call,
            std::shared_ptr<PlaneChannel> channel,
            std::shared_ptr<PlaneChannel::Entry> entry)
      : owner_(owner),
        call_(call),
        channel_(std::move(channel)),
        entry_(std::move(entry)) {}
  void Abandon();

  const PlaneConnections* owner_;
  const char* call_;
  absl::Status error_;  // failed before its reply was queued
  std::shared_ptr<PlaneChannel> channel_;
  std::shared_ptr<PlaneChannel::Entry> entry_;
};

// The one authenticated connection a worker holds to one parameter
// server's data plane (#46: one descriptor per worker on the server),
// shared by every kind of call: dense pulls and pushes, row pulls and
// pushes, from any number of threads at once. Calls are pipelined on it
// (plane_channel.h): a call's request goes out while earlier calls' replies
// are still coming, and replies are read in order into each call's own
// buffers. There is no second connection to the same server: a thread
// that holds a split call unfinished and begins another one (to the same
// server) reads the first one's reply before writing.
//
// The connection is made by the first call (connect, TLS, the token
// handshake). One that broke (a read or write failed, a reply out of step,
// the server closed it) fails its queued calls UNAVAILABLE naming the
// server and why, as gRPC would, and the next call connects afresh,
// asking resolve_port again. A call that finds the connection closed
// before it wrote anything goes on a new one at once.
//
// Thread safety: all methods may be called concurrently.
class PlaneConnections {
 public:
  explicit PlaneConnections(PlaneConnectionOptions options);

  // Sends `request` (a whole frame) for `call` ("PullRows": for errors)
  // and queues `reader` for its reply. `awaited`: Finish is called at once
  // (a split call passes false).
  PlaneCall Send(const char* call, absl::Span<const iovec> request,
                 PlaneReplyReader reader, bool awaited = true);
  // `s` with the peer and the call in front of its message.
  absl::Status Prefixed(const char* call, const absl::Status& s) const;
  const std::string& peer() const { return options_.peer; }

  // Connections made so far (a broken one is replaced by a new one).
  int64_t connects() const;

 private:
  // The connection, made afresh if there is none or it broke.
  absl::StatusOr<std::shared_ptr<PlaneChannel>> Channel();
  absl::StatusOr<Socket> Connect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PlaneConnectionOptions options_;
  // Held while connecting, so concurrent calls make one connection.
  mutable absl::Mutex mu_;
  std::shared_ptr<PlaneChannel> channel_ ABSL_GUARDED_BY(mu_);
  int64_t connects_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_PLANE_CONNECTIONS_H_
