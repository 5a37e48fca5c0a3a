#ifndef TESSERA_COORDINATOR_PS_RECOVERY_H_
#define TESSERA_COORDINATOR_PS_RECOVERY_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/cluster_health.h"
#include "coordinator/control/job_status_board.h"
#include "coordinator/job_checkpointer.h"

namespace tessera {

struct PsRecoveryOptions {
  // Start from the newest valid checkpoint (a restarted coordinator
  // resumes); off, a folder holding an earlier run's checkpoints is an
  // error.
  bool restore = true;
  // The job's epochs: a checkpoint inside one of them cannot be resumed.
  int epochs = 0;
  // How long a failed parameter server may take to come back.
  absl::Duration timeout = absl::Minutes(5);
  // A checkpoint root whose newest valid checkpoint gives the variables'
  // first values when the job has no checkpoint of its own to resume (a
  // warm start at step 0: an imported Keras model's weights, another
  // job's result). Empty: the initializers'.
  std::string init_checkpoint;
  // How many times in a row the job goes back to one checkpoint because a
  // worker restarted with row pushes in flight (RowPushesLost) before the
  // next checkpoint; one more is an error. Each time re-trains the steps
  // since, so a worker that dies before every checkpoint cannot loop the
  // job forever.
  int max_lost_push_recoveries = 3;
};

// Restores the newest valid checkpoint under `root` through `checkpointer`
// (any root: only its servers are used), for a job starting at step 0;
// prints a line to `out`. InvalidArgument naming --init_checkpoint when
// there is none or a variable does not match.
absl::Status WarmStart(const std::string& root, JobCheckpointer& checkpointer,
                       std::FILE* out);

// Where a job starts and how it comes back when a parameter server fails:
// both restore every server from one checkpoint, so that all shards agree
// on one step.
//
// Thread safety: one thread (the training loop's).
class PsRecovery {
 public:
  // Every pointer must outlive this object. `create_variables` creates the
  // shards of the servers that lack them (a restarted server has none).
  PsRecovery(JobCheckpointer* checkpointer, ClusterHealth* health,
             ClusterCoordinator* coordinator, JobStatusBoard* board,
             std::function<absl::Status()> create_variables, std::FILE* out,
             PsRecoveryOptions options);

  // Restores the newest valid checkpoint, or writes the first one (step 0)
  // when there is none, so a server failure in the first epoch can be
  // recovered from too. Returns where the job resumes.
  absl::StatusOr<JobPosition> Start();

  // Called with the error that ended an epoch (or a checkpoint). When a
  // parameter server failed (it does not answer, answers without its
  // shards, or missed a heartbeat since the last recovery): waits for it to
  // come back, re-creates its shards, restores every server from the newest
  // valid checkpoint and returns the position to resume at. The same when
  // `error` is a checkpoint's RowPushesLost (a worker's row pushes in flight
  // went with its process): restoring every server drops the other
  // workers' pushes since the checkpoint too, and the steps since are
  // trained again; past options.max_lost_push_recoveries at one
  // checkpoint, ABORTED says so before anything is waited for or paused.
  // Otherwise returns `error`.
  absl::StatusOr<JobPosition> Recover(const absl::Status& error);

 private:
  // Why the job must go back to its last checkpoint after `error` (empty:
  // it need not); takes the failures it names (a missed heartbeat, a
  // replica's missed step).
  std::vector<std::string> TakeReasons(const absl::Status& error);
  // Counts a recovery from `error` to `latest`: past the bound of
  // recoveries for lost row pushes at one checkpoint (a newer checkpoint
  // starts the count again, a recovery for another reason does not), the
  // error that ends the job.
  absl::Status CountLostPushRecovery(const absl::Status& error,
                                     const ValidCheckpoint& latest);

  JobCheckpointer* const checkpointer_;
  ClusterHealth* const health_;
  ClusterCoordinator* const coordinator_;
  JobStatusBoard* const board_;
  const std::function<absl::Status()> create_variables_;
  std::FILE* const out_;
  const PsRecoveryOptions options_;
  // The checkpoint the last recoveries for lost row pushes went back to,
  // and how many in a row.
  int64_t lost_push_step_ = -1;
  int lost_push_recoveries_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_PS_RECOVERY_H_
