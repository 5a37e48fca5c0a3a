// The workers' replicas of a mirrored or hybrid job in its checkpoints,
// through the workers' SaveReplica and RestoreReplica calls.
#ifndef TESSERA_COORDINATOR_WORKER_REPLICAS_H_
#define TESSERA_COORDINATOR_WORKER_REPLICAS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/rpc/backoff.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/worker_task.h"
#include "proto/job.pb.h"

namespace tessera {

// Thread safety: one call at a time (the checkpointer's caller).
class WorkerReplicas final : public ReplicaCheckpoints {
 public:
  // `workers` are not owned and must outlive this; at most
  // `max_concurrency` restore at once. A worker that is down or restarted
  // when its replica is restored is waited for up to `restart_timeout`
  // (the parameter servers' recovery bound, --ps_recovery_timeout_s).
  // `pushes_in_flight`: the row pushes a worker may leave in flight after
  // its step (hybrid:ssp:S: S; 0 otherwise), which SettleRowPushes cannot
  // settle on a worker that restarted.
  WorkerReplicas(std::vector<WorkerTask*> workers, int max_concurrency,
                 absl::Duration restart_timeout, int pushes_in_flight = 0);

  // The replicas are identical (the chief compares their checksums after
  // every step): the first worker that saves, in index order, saves for
  // all; the error names each worker that could not.
  absl::Status Save(const std::string& directory, int64_t step,
                    SaveShardsResponse* response) override;
  // Every worker restores, in parallel, and its all-reduce starts over at
  // one new epoch (microseconds since 1970, above any count of calls and
  // above the epoch before). A worker that does not answer, or answers
  // unconfigured (it restarted), is waited for and configured again first;
  // past restart_timeout the error names it.
  absl::Status Restore(const ValidCheckpoint& checkpoint) override;
  // Every worker, in parallel, is asked to evaluate an empty range of the
  // test set: Evaluate first waits for the worker's row pushes in flight
  // (and returns the error of one that failed), and evaluates nothing. A
  // worker that restarted (it answers unconfigured) lost those in flight:
  // with pushes_in_flight 0 it had none and passes; otherwise
  // RowPushesLostError names it (its last steps' row gradients may be
  // missing: the job goes back to its last checkpoint). One that does not
  // answer is waited for up to restart_timeout, as in Restore.
  absl::Status SettleRowPushes() override;

  // Saves worker `from`'s replica (the worker of that index) into `directory`
  // (made if missing) and restores every worker from it, `from` too, as Restore
  // does: replicas that parted (a worker restarted with its initializers) are
  // one again. `job` gives the copy's manifest its optimizer and partitioner.
  absl::Status Copy(int from, const std::string& directory,
                    const JobConfig& job);

  // The all-reduce ring re-formed with `ring` (every member, in ring
  // order, worker `indices[i]` the i-th; not owned, must outlive this): a
  // member that was not one before gets the replica of the first member that
  // was, through `directory` (removed after), and every member's all-reduce
  // starts over with the new ring at one new epoch. From then on Save, Restore
  // and Copy are the new members', and every Restore gives them the ring
  // again (a restarted member starts with the ring of its start).
  // Errors name the worker; the members may then hold different rings,
  // and the job goes back to its last checkpoint, which re-forms it again.
  absl::Status Reform(std::vector<int> indices, std::vector<WorkerTask*> ring,
                      const std::string& directory, const JobConfig& job);
  // Worker `index` was removed from the job (it did not come back): it
  // leaves the ring, and the next Save, Restore, Copy or Reform is the
  // members' left, whose ring a Restore or Copy re-forms. Any thread.
  void Drop(int index);

  // The ring's members, in ring order, and their indices (the
  // coordinator's: Copy's `from`), those dropped left out.
  const std::vector<WorkerTask*>& members();
  const std::vector<int>& indices();

 private:
  // Restores every member from `checkpoint`, or only those in `only`
  // (non-empty) and re-forms the others' ring alone.
  absl::Status RestoreMembers(const ValidCheckpoint* checkpoint,
                              const std::vector<bool>& only);

  // Member `w`'s RestoreReplica, waiting up to restart_timeout_ for a
  // worker that is down and configuring one that restarted.
  absl::Status RestoreOne(int w, const RestoreReplicaRequest& request);
  // Member `w`'s part of SettleRowPushes.
  absl::Status SettleOne(int w);
  // Waits, until `deadline`, pausing by `backoff`, for member `w` to answer
  // ready, or to answer unconfigured (restarted): then OK, after configuring
  // it again when `configure`. Past the deadline the error names the worker,
  // `why` it was waited for and `last` (the failure that made it waited for,
  // or the last configuration's).
  absl::Status AwaitWorker(int w, absl::Time deadline, bool configure,
                           absl::string_view why, Backoff* backoff,
                           absl::Status last);
  // "worker <index> (<address>)" of member `w`.
  std::string Who(int w) const;

  // Takes the workers Drop named out of the ring.
  void ApplyDrops();

  absl::Mutex drop_mu_;
  std::vector<int> dropped_ ABSL_GUARDED_BY(drop_mu_);
  std::vector<WorkerTask*> workers_;
  std::vector<int> indices_;  // of workers_: 0 to n - 1 until a Reform
  const int max_concurrency_;
  const absl::Duration restart_timeout_;
  const int pushes_in_flight_;
  uint64_t last_epoch_ = 0;
  // Set once the ring was re-formed: every Restore passes it on.
  bool reformed_ = false;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_WORKER_REPLICAS_H_
