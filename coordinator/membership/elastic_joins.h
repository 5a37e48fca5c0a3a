#ifndef TESSERA_COORDINATOR_MEMBERSHIP_ELASTIC_JOINS_H_
#define TESSERA_COORDINATOR_MEMBERSHIP_ELASTIC_JOINS_H_

#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/training_mode.h"
#include "coordinator/control/elastic_control.h"
#include "coordinator/membership/membership.h"
#include "coordinator/worker_task.h"
#include "proto/coordinator_service.pb.h"
#include "proto/worker_service.pb.h"

namespace tessera {

struct ElasticJoinsOptions {
  TrainingMode mode;
  // How to reach a worker that joins (empty: no worker can join), and the
  // job's tasks as the coordinator was started with them (job name ->
  // addresses), from which a joining worker gets its cluster.
  std::function<std::unique_ptr<WorkerTask>(const std::string& address,
                                            int index)>
      connect_worker;
  std::map<std::string, std::vector<std::string>> cluster_jobs;
  // How long a joining worker may take to be configured and take steps.
  absl::Duration cluster_wait = absl::Seconds(60);
  // Mirrored and hybrid: a worker that joins gets its place in the
  // all-reduce ring, and the members' replica, and one that drains leaves
  // it, at the next round boundary (StepRunner::SetRingReform), which
  // needs the checkpoint folder for the copy. False: joins and drains are
  // refused in the modes with replicas.
  bool reforms_ring = false;
};

// A running job's workers coming and going, as the operator and the
// workers ask: a worker joins (AddWorker: it is given its index and
// cluster at once, then configured with the shard it will serve, then
// takes steps) or drains (DrainWorker: it finishes the steps it holds and
// its shard's steps go to the others). Membership makes each change. The steps
// themselves never change: a step names its examples (ids in a shard, or a run
// of a streamed shard), so whichever worker runs it reads the same ones, and
// each step runs to completion once. Sync rounds keep the parts the plan gave
// them (one per shard), so a global step's batch, and the model, are those of a
// run where the membership never changed.
//
// Contract: joins and drains are taken only between Open and Close (the
// job's epochs); before Open a join is UNAVAILABLE (the worker retries),
// after Close refused. Joins are taken one at a time, so that the index a
// worker's cluster is built with is the one Membership gives it. A mirrored
// or hybrid job takes joins and drains when its ring can be re-formed
// (reforms_ring): the ring changes at the next round boundary, a newcomer
// taking no step and a drained worker running its parts of the rounds
// scheduled until then; without reforms_ring both are refused, naming the
// mode.
// `join_config(index, queue)` is the configuration of joining worker
// `index` that will serve queue `queue`'s shard. Thread safety: any
// thread; Close (and the destructor) waits for the joins being configured.
class ElasticJoins : public ElasticControl {
 public:
  using JoinConfig =
      std::function<absl::StatusOr<WorkerConfig>(int index, int queue)>;

  ElasticJoins(Membership* membership, JoinConfig join_config, std::FILE* out,
               ElasticJoinsOptions options);
  ~ElasticJoins() override;

  absl::StatusOr<AddWorkerResponse> AddWorker(
      const std::string& address) override;
  absl::StatusOr<int> DrainWorker(const std::string& worker) override;

  // Joins and drains are taken from now on (the job trains).
  void Open() { accepting_joins_ = true; }
  // Ends joins: no new one is taken, and those being configured stop.
  void Close();

 private:
  // Configures the joining worker `index` with the shard it will serve and
  // lets it take steps; forgets it when it cannot be configured in time.
  void FinishJoin(int index, WorkerTask* task);
  // "mode X cannot ..." for a join or drain in a mode with replicas.
  absl::Status RefuseMembershipChange(const std::string& what) const;

  Membership* const membership_;
  const JoinConfig join_config_;
  std::FILE* const out_;
  const ElasticJoinsOptions options_;

  std::atomic<bool> accepting_joins_{false};
  std::atomic<bool> joins_closed_{false};
  absl::Mutex join_mu_;
  std::vector<std::thread> join_threads_ ABSL_GUARDED_BY(join_mu_);
};

// ClusterCoordinator's news of a worker (its new state), into the
// membership; a drained worker is told to exit. Any thread (the
// coordinator's).
void RecordMemberChange(Membership* membership, std::FILE* out, int worker,
                        MemberState state, const std::string& note);

// When the workers changed while the job ran (`now` holds other than the
// `initial` workers, or one not active): each one's state and the steps
// it ran, one line each.
void PrintMembershipChanges(std::FILE* out, const JobStatus& now, int initial);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_MEMBERSHIP_ELASTIC_JOINS_H_
