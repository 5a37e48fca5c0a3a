#ifndef TESSERA_COORDINATOR_OPERATOR_COMMANDS_H_
#define TESSERA_COORDINATOR_OPERATOR_COMMANDS_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>

#include "absl/status/status.h"
#include "common/training_mode.h"
#include "coordinator/cluster_health.h"
#include "coordinator/control/job_control.h"
#include "coordinator/control/job_status_board.h"
#include "coordinator/epoch_loop.h"
#include "coordinator/job_setup.h"
#include "coordinator/report/metrics_writer.h"
#include "coordinator/step_plan.h"
#include "coordinator/step_runner.h"

namespace tessera {

// What the operator commands drive; owned by the job.
struct OperatorCommandsParts {
  EpochLoop* loop = nullptr;  // its plan, checkpoints, evaluation, results
  JobSetup* setup = nullptr;
  StepRunner* runner = nullptr;
  ClusterHealth* health = nullptr;
  MetricsWriter* metrics = nullptr;
  JobStatusBoard* board = nullptr;
  JobControl* control = nullptr;
  // Set while steps run: a stop then waits for the next step boundary.
  std::atomic<bool>* in_steps = nullptr;
  std::FILE* out = nullptr;
};

struct OperatorCommandsOptions {
  TrainingMode mode;
  int epochs = 0;       // the job's
  int num_workers = 0;  // those the job started with
  // Whether the job writes checkpoints (a failed one is then recorded).
  bool writes_checkpoints = false;
  // After the epochs, wait for commands instead of ending.
  bool wait_for_commands = false;
};

// What tessera_ctl asks of a job once its epochs are over: extra steps
// (continuing the data order, evaluated and reported like an epoch),
// checkpoints between steps (asked for, or by the job's cadence of
// --checkpoint_every_steps/seconds), and stop.
//
// Contract: Serve runs on the job's thread after the epochs, until a stop
// or (without wait_for_commands) until nothing is asked; a checkpoint or
// stop asked for while extra steps run is taken at the next step boundary.
class OperatorCommands {
 public:
  OperatorCommands(OperatorCommandsParts parts,
                   OperatorCommandsOptions options);

  // Serves tessera_ctl after epoch `epoch`: checkpoints, extra steps, stop.
  absl::Status Serve(int epoch);

 private:
  // Runs `steps` more steps (global steps in lockstep modes) continuing
  // the data order, evaluates, and reports them.
  absl::Status RunExtraSteps(int64_t steps);
  // A checkpoint at the current step boundary, past the epochs.
  void CheckpointBetweenSteps();

  const OperatorCommandsParts parts_;
  const OperatorCommandsOptions options_;
  // Steps of a started epoch that extra steps have not used yet.
  std::deque<PlannedStep> extra_plan_;
  int64_t extra_steps_run_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_OPERATOR_COMMANDS_H_
