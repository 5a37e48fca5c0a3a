#ifndef TESSERA_COORDINATOR_EPOCH_LOOP_H_
#define TESSERA_COORDINATOR_EPOCH_LOOP_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/training_mode.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/cluster_health.h"
#include "coordinator/control/job_control.h"
#include "coordinator/control/job_status_board.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/job_setup.h"
#include "coordinator/ps_recovery.h"
#include "coordinator/report/epoch_result.h"
#include "coordinator/report/metrics_writer.h"
#include "coordinator/step_plan.h"
#include "coordinator/step_runner.h"
#include "coordinator/test_set_evaluator.h"
#include "proto/job.pb.h"

namespace tessera {

// What the epoch loop drives; owned by the job. `checkpointer` and
// `recovery` are null in a job without checkpoints.
struct EpochLoopParts {
  ClusterCoordinator* coordinator = nullptr;
  StepRunner* runner = nullptr;
  JobSetup* setup = nullptr;
  TestSetEvaluator* evaluator = nullptr;
  ClusterHealth* health = nullptr;
  MetricsWriter* metrics = nullptr;
  JobStatusBoard* board = nullptr;
  JobControl* control = nullptr;
  JobCheckpointer* checkpointer = nullptr;
  PsRecovery* recovery = nullptr;
  // Set while steps run: a stop then waits for the next step boundary.
  std::atomic<bool>* in_steps = nullptr;
  std::FILE* out = nullptr;
};

struct EpochLoopOptions {
  TrainingMode mode;
  // A checkpoint after every this many epochs and after the last.
  int checkpoint_every_epochs = 1;
  // Checkpoints inside an epoch too (0 / zero: none), at the first step
  // boundary this many steps (global steps in lockstep modes) or this long
  // after the last checkpoint: a lost parameter server then costs at most
  // that much training. A checkpoint inside an epoch keeps the epoch's
  // progress, so the job resumes it where it was taken.
  int64_t checkpoint_every_steps = 0;
  absl::Duration checkpoint_every = absl::ZeroDuration();
  // Where metrics.jsonl is (empty: nowhere), whose epochs a restarted
  // coordinator counts in the job's totals.
  std::string run_dir;
  // False for a regression (mean-squared-error loss): no accuracy.
  bool has_accuracy = true;
};

// The job's epochs: each epoch's steps run, the test set evaluated, the
// epoch checked (every example once), kept (metrics, charts) and
// checkpointed at its cadence; a failure recovers from the last checkpoint
// (PsRecovery) and trains again from there; an operator's stop ends the
// epochs at a step boundary with a checkpoint that resumes there. It also
// keeps what the job trained (results) and where it stands (positions),
// which operator commands continue after the epochs.
//
// Contract: Plan (or ResumeFrom) before TrainEpochs; after TrainEpochs
// (unless stopped_inside_epoch), EndAtStop once no more steps run. One thread
// (the job's), except that the parts' own thread safety holds.
class EpochLoop {
 public:
  EpochLoop(JobConfig job, EpochLoopParts parts, EpochLoopOptions options);

  // The step plan as it is at the start of epoch `epoch`.
  absl::Status Plan(int epoch);
  // Starts from a restored checkpoint at `position`: the totals count the
  // epochs that earlier coordinators trained, and the plan stands there.
  absl::Status ResumeFrom(const JobPosition& position);
  // Trains epochs from `position` until the last or a stop; returns the
  // epoch it reached (epochs + 1 when all were trained).
  absl::StatusOr<int> TrainEpochs(JobPosition position);
  // After a stop (if one came) at epoch `epoch`'s boundary: the checkpoint
  // that keeps the epochs trained since the last one, and the stop's line.
  void EndAtStop(int epoch);

  // Evaluates the model on the test set into `result`.
  absl::Status Evaluate(EpochResult* result);
  // --evaluate_only: restores the newest checkpoint and evaluates it on
  // the test set with `workers` workers; nothing is trained or written to
  // the checkpoints.
  absl::Status EvaluateCheckpoint(int workers);
  // Writes a checkpoint at `position` and tells waiting operators.
  absl::StatusOr<std::string> SaveCheckpoint(const JobPosition& position);
  // Where the job is now, at a step boundary, after epoch `epoch` began.
  JobPosition PositionAfter(int epoch) const;
  // Keeps a finished epoch or extra steps: summary, metrics, charts.
  void Keep(EpochResult result);
  // Whether a checkpoint is due at this step boundary (inside an epoch or
  // among tessera_ctl's extra steps): its cadence (steps or time since the
  // last checkpoint) or an operator.
  bool CheckpointDue();

  StepPlan* data() const { return data_.get(); }
  // Epochs and extra steps, in order.
  const std::vector<EpochResult>& results() const { return results_; }
  // Whether an operator's stop ended the job before its epochs were all
  // trained.
  bool stopped_early() const { return stopped_early_; }
  // Whether the stop came inside an epoch (TrainEpochs wrote its
  // checkpoint and line): nothing is left to serve or end.
  bool stopped_inside_epoch() const { return stopped_inside_epoch_; }
  // Of results(), the epochs that earlier coordinators of the job trained,
  // and the steps they re-ran.
  int resumed_epochs() const { return resumed_epochs_; }
  int64_t earlier_steps_rerun() const { return earlier_steps_rerun_; }

 private:
  // The end of a job stopped inside epoch `epoch` after `done` of its
  // `planned` steps, which trained `result`: a checkpoint there (which a
  // restarted job resumes mid-epoch) and the summary's row.
  absl::Status StopInsideEpoch(int epoch, int64_t planned, int64_t done,
                               EpochResult result);
  // Runs epoch `epoch`'s steps (those a stop's checkpoint left of it)
  // into `result`; a stop inside it ends the epochs (StopInsideEpoch).
  absl::Status RunEpoch(int epoch, EpochResult* result);
  // The checkpoint after a finished epoch, when its cadence or an
  // operator asks for one. Returns the failure to recover from when a
  // server lost its shards or a worker its row pushes in flight
  // (MustRecover); a write that failed otherwise is recorded.
  absl::Status CheckpointEpoch(int epoch, const EpochResult& result);
  // Whether a checkpoint that failed with `failed_save` takes the job back
  // to its last checkpoint (a server lost its shards, or a worker its row
  // pushes in flight) rather than being recorded as a write failure.
  bool MustRecover(const absl::Status& failed_save);
  // Recovers from `failure` (PsRecovery) and resumes there.
  absl::Status Recover(const absl::Status& failure, int* epoch);
  // Internal error when a one-pass epoch did not train on every example
  // exactly once.
  absl::Status CheckEpochCoverage(const EpochResult& result) const;
  // Resumes at `position` after a recovery.
  absl::Status ResumeAt(const JobPosition& position, int* epoch);
  // The cadence counts from here: a checkpoint written (or tried), or
  // restored.
  void RestartCadence();
  // A checkpoint at a step boundary inside epoch `epoch`, after `done` of
  // its `planned` steps, which trained `result`. Returns the failure to
  // recover from (MustRecover); a write that failed otherwise is recorded
  // and training goes on.
  absl::Status CheckpointInsideEpoch(int epoch, int64_t planned, int64_t done,
                                     const EpochResult& result);

  const JobConfig job_;
  const EpochLoopParts parts_;
  const EpochLoopOptions options_;

  std::unique_ptr<StepPlan> data_;
  // Where the job resumed (a checkpoint inside an epoch: its steps done).
  JobPosition resume_;
  bool stopped_early_ = false;
  bool stopped_inside_epoch_ = false;
  int64_t last_checkpoint_step_ = -1;
  // Where the cadence of checkpoints inside epochs counts from.
  int64_t cadence_step_ = 0;         // the job's step
  int64_t cadence_global_step_ = 0;  // lockstep modes' global step
  absl::Time cadence_time_ = absl::InfinitePast();
  std::vector<EpochResult> results_;
  int resumed_epochs_ = 0;
  int64_t earlier_steps_rerun_ = 0;
  // coordinator->steps_rerun() when the last epoch was kept.
  int64_t rerun_counted_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_EPOCH_LOOP_H_
