#ifndef TESSERA_COORDINATOR_CLUSTER_HEALTH_H_
#define TESSERA_COORDINATOR_CLUSTER_HEALTH_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/worker_task.h"
#include "proto/coordinator_service.pb.h"
#include "ps_server/client/ps_client.h"

namespace tessera {

// The health of a job's tasks as the coordinator sees it: waiting for
// every task at start, telling which parameter servers failed, and a
// heartbeat that watches the servers.
//
// The servers' last answers are kept, so that status queries (on gRPC's
// threads) read them without an RPC of their own.
//
// Thread safety: ServerStates may be called from any thread; the rest
// from the training loop's thread.
class ClusterHealth {
 public:
  // `ps` and `workers` must outlive this object; progress lines go to
  // `out`. Up to `concurrency` tasks are asked at once (BoundedForEach).
  ClusterHealth(std::vector<PsClient*> ps, std::vector<WorkerTask*> workers,
                std::FILE* out, int concurrency);
  // Stops the heartbeat.
  ~ClusterHealth();
  ClusterHealth(const ClusterHealth&) = delete;
  ClusterHealth& operator=(const ClusterHealth&) = delete;

  // Waits until every parameter server, then every worker, answers a
  // health check (the servers at once, then the workers at once). Every
  // 5 s it prints a task it waits for and why; Unavailable names the
  // first task (by index) that did not answer within `wait`.
  absl::Status WaitForCluster(absl::Duration wait);

  // Shards each parameter server holds once the variables exist; a server
  // that holds fewer has restarted.
  void ExpectShards(std::vector<int64_t> shards);

  // Asks every parameter server now: those that do not answer or have lost
  // shards, with why.
  std::vector<std::string> FailedServers();

  // Waits until every parameter server answers (a failed one restarted);
  // Unavailable names the first that did not within `timeout`.
  absl::Status WaitForServers(absl::Duration timeout);

  // Every `interval`, asks every server; when one failed and the
  // heartbeat is not paused, calls `on_failure` with why (from the
  // heartbeat's thread). A null `on_failure` only keeps the answers.
  void StartHeartbeat(absl::Duration interval,
                      std::function<void(absl::Status)> on_failure);
  // Recovery holds the heartbeat off while it restores the servers.
  void Pause(bool paused);
  // Whether the heartbeat reported a failed server since the last call. A
  // server that stopped answering for a while (paused, overloaded) may
  // answer again, shards and all, by the time a recovery asks, yet the
  // steps it failed were cut short: the recovery must still restore.
  bool TakeHeartbeatFailure();
  // The same, leaving it for TakeHeartbeatFailure.
  bool heartbeat_failed() const;

  // Asks every server now, keeping the answers (for status queries that
  // follow at once, such as after an epoch).
  void Refresh() { FailedServers(); }

  // The servers' last answers (no RPC).
  std::vector<ServerState> ServerStates() const;

 private:
  // Asks server k now and keeps its answer.
  absl::Status Check(size_t k, HealthResponse* health);
  void HeartbeatLoop(absl::Duration interval,
                     std::function<void(absl::Status)> on_failure);

  const std::vector<PsClient*> ps_;
  const std::vector<WorkerTask*> workers_;
  std::FILE* const out_;
  const int concurrency_;
  std::vector<int64_t> expected_shards_;

  mutable absl::Mutex mu_;
  std::vector<ServerState> states_ ABSL_GUARDED_BY(mu_);
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool heartbeat_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread heartbeat_;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_CLUSTER_HEALTH_H_
