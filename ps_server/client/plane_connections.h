#ifndef TESSERA_PS_SERVER_CLIENT_PLANE_CONNECTIONS_H_
#define TESSERA_PS_SERVER_CLIENT_PLANE_CONNECTIONS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"

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

// The connection while one call has it (a Socket: the call reads and
// writes it as one), for the call's request and reply. Given back with
// PlaneConnections::Release once the reply was read in full; dropped
// otherwise (the connection broke, or the stream is out of step), which
// closes it, and the next call connects afresh.
class PlaneLease : public Socket {
 public:
  PlaneLease(PlaneLease&& other) noexcept
      : Socket(std::move(other)), owner_(other.owner_), extra_(other.extra_) {
    other.owner_ = nullptr;
  }
  PlaneLease& operator=(PlaneLease&& other) noexcept;
  PlaneLease(const PlaneLease&) = delete;
  ~PlaneLease();

 private:
  friend class PlaneConnections;
  PlaneLease(PlaneConnections* owner, Socket socket, bool extra)
      : Socket(std::move(socket)), owner_(owner), extra_(extra) {}

  PlaneConnections* owner_;
  bool extra_;  // a connection of its own (see PlaneConnections), not kept
};

// The one authenticated connection a worker holds to one parameter
// server's data plane (#46: one descriptor per worker on the server, not
// one per kind of call), shared by every kind of call: dense pulls and
// pushes, row pulls and pushes.
//
// A call leases the connection (making it first: connect, handshake) from
// its request until its reply was read, so calls on one connection are
// whole and in order; a second call waits for the first's reply. Calls to
// different servers run at once. A connection that broke or timed out is
// not given back: its call returns UNAVAILABLE or DEADLINE_EXCEEDED as on
// gRPC, and the next call connects afresh.
//
// Deadlock: a thread that holds the lease (a dense call begun and not yet
// finished) and begins a second call to the same server would wait for
// itself; that call gets a connection of its own instead, closed after its
// reply (the one case of a second connection; a worker's steps begin one
// call per server). Threads that hold leases of several servers at once
// take them in the same order (ShardedParameters: by ps task).
//
// Thread safety: all methods may be called concurrently.
class PlaneConnections {
 public:
  explicit PlaneConnections(PlaneConnectionOptions options);

  // Waits while another call holds the connection.
  absl::StatusOr<PlaneLease> Acquire();
  // Gives back a connection whose last reply was read in full.
  void Release(PlaneLease lease);
  // `s` with the peer and the call in front of its message.
  absl::Status Prefixed(const char* call, const absl::Status& s) const;
  const std::string& peer() const { return options_.peer; }

  // Connections made so far (a broken one is replaced by a new one).
  int64_t connects() const;

 private:
  friend class PlaneLease;
  absl::StatusOr<Socket> Connect();
  // A lease ended without Release: its connection is gone.
  void Lost();

  const PlaneConnectionOptions options_;
  mutable absl::Mutex mu_;
  bool leased_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id holder_ ABSL_GUARDED_BY(mu_);  // who leased it
  std::optional<Socket> idle_ ABSL_GUARDED_BY(mu_);
  int64_t connects_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_PLANE_CONNECTIONS_H_
