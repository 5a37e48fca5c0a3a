#ifndef TESSERA_COORDINATOR_STEP_RUNNER_H_
#define TESSERA_COORDINATOR_STEP_RUNNER_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/training_mode.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/control/job_status_board.h"
#include "coordinator/learning_rates.h"
#include "coordinator/report/epoch_result.h"
#include "coordinator/report/metrics_writer.h"
#include "coordinator/report/progress_meter.h"
#include "coordinator/step_plan.h"

namespace tessera {

struct StepRunnerOptions {
  TrainingMode mode;
  int num_workers = 1;
  // Sync: a global step is over once all workers but this many pushed.
  int backup_workers = 0;
  int epochs = 0;  // for the status board's epoch
  // Steps a worker takes per call (ClusterCoordinatorOptions): a run that
  // can be paused keeps enough steps queued to fill every call.
  int steps_per_call = 1;
  // The job's learning rates: shown on the progress line and the status
  // board, and kept in the step log and the epoch's figures.
  std::optional<JobLearningRates> learning_rates;
  // Lockstep modes: called with a global step once its required parts are
  // done, before the step after it is scheduled (global-norm clipping
  // across the servers, coordinator/step_norm_exchange.h). An error ends
  // the epoch.
  std::function<absl::Status(int64_t global_step)> round_done;
};

// Runs planned steps on the cluster and counts what they did: async and
// ssp steps are queued at once, sync and mirrored steps one global step
// (a round of one step per worker) at a time. Step ids continue across
// calls, so every step of a job has its own.
//
// Thread safety: one thread (the training loop's).
class StepRunner {
 public:
  // Every pointer must outlive this object; the progress line goes to
  // `out`.
  StepRunner(ClusterCoordinator* coordinator, StepRunnerOptions options,
             JobStatusBoard* board, MetricsWriter* metrics, std::FILE* out);

  // Runs `steps` of epoch `epoch` (epochs + 1 for extra steps), shown as
  // `label`, and fills *result's training figures.
  //
  // With `pause`: it is asked before each step (each global step in
  // lockstep modes) is scheduled; once it says true, no more steps are
  // scheduled, the steps in flight finish, and the steps not run are moved
  // to *not_run, so the model is at a step boundary.
  //
  // With `boundary`: a checkpoint inside the steps (Boundary).
  struct Boundary;
  absl::Status Run(std::vector<PlannedStep> steps, int epoch,
                   const StepPlan& data, const std::string& label,
                   EpochResult* result,
                   const std::function<bool()>& pause = nullptr,
                   std::vector<PlannedStep>* not_run = nullptr,
                   const Boundary* boundary = nullptr);

  // A step boundary at which every parameter server (and replica) holds
  // exactly the steps scheduled before it: `due` is asked before each step
  // (each global step in lockstep modes) is scheduled; once it says true,
  // no more steps are handed out, the steps in flight finish (their
  // updates applied everywhere), and `take` is called with how many of the
  // call's steps holding data are not yet scheduled and the figures of
  // those done so far in the call. Then the steps go on. An error from
  // `take` ends the run with it. Not right after a mirrored round ran
  // again (the replicas are then repaired, not yet past the round).
  struct Boundary {
    std::function<bool()> due;
    std::function<absl::Status(int64_t left, const EpochResult& so_far)> take;
  };

  // Mirrored and hybrid: called when a round failed on some worker, every
  // step in flight has ended and no part of that round or a later one
  // completed, with the round's global step and its error. OK means every
  // replica is again that of before the round (ReplicaRepair): the round
  // and those after it run again, under their step ids (so with their
  // dropout seeds) and global steps. Else the epoch ends with the error,
  // as without a repair; a RowPushesLost refusal instead (hybrid:ssp),
  // naming the round's error.
  using RoundRepair =
      std::function<absl::Status(int64_t global_step, const absl::Status&)>;
  void SetRoundRepair(RoundRepair repair) { repair_ = std::move(repair); }

  // Mirrored and hybrid: the all-reduce ring's members changed (a worker
  // joined: ClusterCoordinator::ring_changed). At the next round boundary,
  // no step in flight, this is called with the ring's members (worker
  // indices, in ring order) and the global step about to run; OK means
  // every member's all-reduce has the new ring and a newcomer the others'
  // replica, and the rounds from then on have one part per member
  // (GroupIntoRounds), part i scheduled to member i's queue. Else the
  // epoch ends with the error.
  using RingReform = std::function<absl::Status(const std::vector<int>& ring,
                                                int64_t global_step)>;
  void SetRingReform(RingReform reform) { reform_ = std::move(reform); }

  // The id of the next step, and of the next global step (lockstep).
  int64_t next_step() const { return next_step_; }
  int64_t next_global_step() const { return next_global_step_; }

  // The job went back to a checkpoint taken when the next global step was
  // `next_sync_step`: the rounds after it were undone on the servers,
  // whose update counts (the learning rate's t) went back with them, while
  // the global step ids go on. The learning rate shown counts them out.
  void UndoRoundsSince(int64_t next_sync_step) {
    undone_rounds_ += std::max<int64_t>(0, next_global_step_ - next_sync_step);
  }
  // Also the status board's steps done and scheduled (tessera_ctl status):
  // both count step ids from the checkpoint a job resumed at on, a step
  // when it is handed to a worker and when it finishes (once, however often
  // it was run again), so done never passes scheduled.
  void SetPosition(int64_t step, int64_t global_step);

 private:
  class LockstepEpoch;  // RunLockstep's state, in step_runner.cc

  absl::Status RunQueued(std::vector<PlannedStep> steps, int epoch,
                         const StepPlan& data,
                         const std::function<bool()>& pause,
                         std::vector<PlannedStep>* not_run,
                         const Boundary* boundary, ProgressMeter* meter,
                         EpochResult* result, int64_t* correct);
  absl::Status RunLockstep(std::vector<PlannedStep> steps, int epoch,
                           const StepPlan& data,
                           const std::function<bool()>& pause,
                           std::vector<PlannedStep>* not_run,
                           const Boundary* boundary, ProgressMeter* meter,
                           EpochResult* result, int64_t* correct);
  // At a round boundary (none in flight): the ring's new members (reform_),
  // and the rounds from `next` on regrouped, one part per member.
  absl::Status ReformRing(std::vector<std::vector<PlannedStep>>* rounds,
                          size_t next);
  StepRequest MakeRequest(int epoch, const PlannedStep& planned,
                          const StepPlan& data);
  // Adds a finished step to the figures, the board and the step log.
  void Record(const StepResponse& response, int64_t step, ProgressMeter* meter,
              EpochResult* result, int64_t* correct);
  void ShowScheduled(int epoch);

  ClusterCoordinator* const coordinator_;
  const StepRunnerOptions options_;
  JobStatusBoard* const board_;
  MetricsWriter* const metrics_;
  std::FILE* const out_;
  RoundRepair repair_;
  RingReform reform_;
  // Each part's queue once the ring was re-formed (part i: member i's);
  // empty: the rounds of the plan, part by shard.
  std::vector<int> part_queues_;
  int64_t next_step_ = 0;
  int64_t next_global_step_ = 0;
  int64_t undone_rounds_ = 0;  // UndoRoundsSince
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_STEP_RUNNER_H_
