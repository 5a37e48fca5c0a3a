// The workers' replicas of a mirrored or hybrid job in its checkpoints,
// through the workers' SaveReplica and RestoreReplica calls.
#ifndef TESSERA_COORDINATOR_WORKER_REPLICAS_H_
#define TESSERA_COORDINATOR_WORKER_REPLICAS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/worker_task.h"
#include "proto/job.pb.h"

namespace tessera {

// Thread safety: one call at a time (the checkpointer's caller).
class WorkerReplicas final : public ReplicaCheckpoints {
 public:
  // `workers` are not owned and must outlive this; at most
  // `max_concurrency` restore at once.
  WorkerReplicas(std::vector<WorkerTask*> workers, int max_concurrency);

  // The replicas are identical (the chief compares their checksums after
  // every step): the first worker that saves, in index order, saves for
  // all; the error names each worker that could not.
  absl::Status Save(const std::string& directory, int64_t step,
                    SaveShardsResponse* response) override;
  // Every worker restores, in parallel, and its all-reduce starts over at
  // one new epoch (microseconds since 1970, above any count of calls and
  // above the epoch before).
  absl::Status Restore(const ValidCheckpoint& checkpoint) override;
  // Every worker, in parallel, is asked to evaluate an empty range of the
  // test set: Evaluate first waits for the worker's row pushes in flight
  // (and returns the error of one that failed), and evaluates nothing.
  absl::Status SettleRowPushes() override;

  // Saves worker `from`'s replica into `directory` (made if missing) and
  // restores every worker from it, `from` too, as Restore does: replicas
  // that parted (a worker restarted with its initializers) are one again.
  // `job` gives the copy's manifest its optimizer and partitioner.
  absl::Status Copy(int from, const std::string& directory,
                    const JobConfig& job);

 private:
  const std::vector<WorkerTask*> workers_;
  const int max_concurrency_;
  uint64_t last_epoch_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_WORKER_REPLICAS_H_
