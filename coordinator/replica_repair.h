// Brings the replicas of a mirrored or hybrid job back together after a
// worker died inside a round, so that the round runs again: the job loses
// the round in flight, not the steps since its last checkpoint.
#ifndef TESSERA_COORDINATOR_REPLICA_REPAIR_H_
#define TESSERA_COORDINATOR_REPLICA_REPAIR_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/cluster_health.h"
#include "coordinator/replica_losses.h"
#include "coordinator/worker_replicas.h"
#include "proto/job.pb.h"

namespace tessera {

// A replica applies a round only once its all-reduce has summed every
// worker's part, so when a round failed on every worker, the workers that
// did not restart all hold the model of before it. The restarted ones hold
// their initializers. Repair copies a survivor's replica onto every worker
// and starts their all-reduce over (WorkerReplicas::Copy).
//
// Repair refuses, and the job falls back to its last checkpoint
// (PsRecovery), when
// - a parameter server failed too: its shards went back further;
// - no worker restarted: the failure was not a lost process, and the same
//   round would fail again;
// - every worker restarted, or a restarted one is not back;
// - hybrid:ssp:S: a restarted worker's last row pushes (up to S in flight)
//   went with its process, and the rounds they belonged to are done
//   (RowPushesLostError, which the epoch's error carries to PsRecovery);
// - the copy fails.
//
// Thread safety: one thread (the training loop's).
class ReplicaRepair {
 public:
  // Every pointer must outlive this object. The copy is written into
  // `directory`, which every worker must be able to read (the checkpoint
  // folder's); a line goes to `out` for each repair.
  ReplicaRepair(ClusterCoordinator* coordinator, ClusterHealth* health,
                WorkerReplicas* replicas, std::string directory, JobConfig job,
                std::FILE* out);

  // Called once every step of the failed round (global step
  // `global_step`, which ended with `error`) and of the rounds after it
  // has finished, none of them completed on any worker. OK: every replica
  // is that of before the round, and the round may run again.
  absl::Status Repair(int64_t global_step, const absl::Status& error);

 private:
  ClusterCoordinator* const coordinator_;
  ClusterHealth* const health_;
  WorkerReplicas* const replicas_;
  const std::string directory_;
  const JobConfig job_;
  std::FILE* const out_;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REPLICA_REPAIR_H_
