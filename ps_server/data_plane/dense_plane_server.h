#ifndef TESSERA_PS_SERVER_DATA_PLANE_DENSE_PLANE_SERVER_H_
#define TESSERA_PS_SERVER_DATA_PLANE_DENSE_PLANE_SERVER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/data_plane/event_listener.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/listener.h"
#include "common/data_plane/socket.h"
#include "common/rpc/tls_files.h"
#include "common/serial_executor.h"
#include "ps_server/data_plane/row_plane_service.h"
#include "ps_server/ps_core.h"
#include "ps_server/shard_store.h"

namespace tessera {

// How a data plane server runs its connections (issue #46).
enum class DataPlaneServing {
  // common/data_plane/listener.h: a thread per connection, blocking
  // throughout; each connection's pushes are applied on a second thread of
  // its own, overlapping its next transfer. Kept to compare against.
  kThreadPerConnection,
  // common/data_plane/event_listener.h: a fixed pool of threads over one
  // epoll reactor, any number of connections; a push is applied on the
  // pool thread that received it, and answered after its update. A pool
  // thread never writes to a socket while it holds a shard's lock (a pull
  // is copied out first): the write wakes the client, which may take the
  // thread's core, and every pool thread wanting that shard would wait.
  kEventPool,
};

struct DensePlaneServerOptions {
  // Where to listen: "" or "::" every interface; port 0 lets the kernel
  // choose (announced through the core, in Health).
  std::string host;
  int port = 0;
  // Connections must prove they hold it (common/data_plane/handshake.h);
  // empty: every connection is accepted, as the gRPC service does.
  std::string job_token;
  // A connection that makes no progress for this long is dropped.
  double timeout_s = 120;
  // TLS with the job's files (common/data_plane/tls.h), as its gRPC
  // server; nullopt: plain TCP.
  std::optional<TlsFiles> tls;
  DataPlaneServing serving = DataPlaneServing::kEventPool;
  // kEventPool's threads; 0: one per core (at least 2).
  int threads = 0;
  // kEventPool: serve row requests (the small ones) ahead of dense ones
  // (EventListener's small requests first), `small_per_large` of them per
  // dense one while both wait. Off by default: on the shared 2-core
  // machine of bench/results/connections.md (run 6, 64 connections) it
  // took dense MB/s at or above the thread-per-connection plane's from 14
  // of 18 runs to 11 and rows/s from 5 to 7, no clear gain; off, every
  // request is small and served in the order it became ready, as before.
  bool rows_first = false;
  int small_per_large = 2;  // at least 1 (Start refuses less)
};

// A parameter server's TCP data plane (docs/design.md, "Bytes and
// control travel apart"): dense pulls and pushes of the same shards the gRPC
// service holds, framed as ps_server/wire/dense_wire.h says, one
// thread per connection. The same connections carry sparse row pulls and
// pushes, which RowPlaneService serves (row_wire.h).
//
// The guarantees are the gRPC path's: a push applies nothing unless every
// declared byte arrived, every shard exists with its size, and every
// float is finite; it is applied by the same code (ApplyDensePush), so
// sync, ssp and backup-worker semantics are the same; errors carry the same
// codes and messages. With a thread per connection a pull is sent
// straight from the shard's memory under its shared lock (chunks of at
// most 4 MiB each, so a slow reader holds off updates for one chunk at
// most); on the pool it is copied out in pieces of 1 MiB and sent after
// each. A push is received straight into the shard's reused gradient
// buffer and checked while it is in cache; with a thread per connection
// its update runs after the answer went out, on a second thread of the
// connection, overlapping its next transfer; on the pool, on the pool
// thread, before the answer.
//
// Thread safety: connections are served concurrently; the destructor
// closes them all and returns once none is served.
class DensePlaneServer {
 public:
  // `core` (the shards, sync steps and counters the gRPC service serves
  // too) must outlive the server. Sets the core's announced port.
  static absl::StatusOr<std::unique_ptr<DensePlaneServer>> Start(
      PsCore* core, DensePlaneServerOptions options);
  ~DensePlaneServer();

  int port() const;
  // The threads serving connections: the pool's size, or 0 for a thread
  // per connection.
  int pool_threads() const;
  // Connections accepted so far.
  int64_t connections_accepted() const;

 private:
  // What one connection reuses from request to request.
  struct ConnectionState {
    std::vector<char> scratch;  // drains refused pushes
    // kEventPool: a dense pull's values, copied out of the shard under its
    // lock and sent after it (a piece of at most kPullPieceBytes).
    std::vector<float> pulled;
    RowPlaneService::Scratch rows;
    // kThreadPerConnection: applies the connection's pushes; declared
    // last, so it finishes its updates before the buffers go.
    std::unique_ptr<SerialExecutor> applier;
  };
  class PooledPlaneConnection;

  DensePlaneServer(PsCore* core, DensePlaneServerOptions options);
  // kThreadPerConnection: the handshake, then every request.
  void Serve(Socket& socket);
  // One request whose header was read. Each returns an error only when the
  // connection must close (it broke, or the peer does not speak the
  // protocol); a refused request gets an error reply and the connection
  // goes on.
  absl::Status ServeRequest(Socket& socket, const FrameHeader& request,
                            ConnectionState* state, bool overlap);
  // `copy` null: sent straight from the shard under its shared lock;
  // else copied into it under the lock and sent after.
  absl::Status ServePull(Socket& socket, const FrameHeader& request,
                         std::vector<float>* copy);
  // `applier` null: the update runs on this thread, then the answer.
  absl::Status ServePush(Socket& socket, const FrameHeader& request,
                         std::vector<char>* scratch,
                         std::unique_ptr<SerialExecutor>* applier);

  PsCore* const core_;
  ShardStore* const store_;  // the core's
  const DensePlaneServerOptions options_;
  RowPlaneService rows_;
  // Last: they stop before the rest go. One of them runs.
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<EventListener> events_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_DATA_PLANE_DENSE_PLANE_SERVER_H_
