#ifndef TESSERA_COORDINATOR_TRAINING_JOB_H_
#define TESSERA_COORDINATOR_TRAINING_JOB_H_

#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "common/event_file_writer.h"
#include "common/training_mode.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/data_plan.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/control/job_control.h"
#include "coordinator/report/progress_meter.h"
#include "coordinator/remote_worker.h"
#include "coordinator/variable_plan.h"
#include "proto/coordinator_service.pb.h"
#include "proto/job.pb.h"
#include "ps_server/ps_client.h"

namespace tessera {

struct TrainingJobOptions {
  std::string run_dir;  // metrics.jsonl goes here when set
  // How long to wait for every parameter server and worker to answer.
  absl::Duration cluster_wait = absl::Seconds(60);
  // Tell the parameter servers and workers to exit when the job ends.
  bool shutdown_cluster = true;
  // Workers pull the next step's parameters while a step computes.
  bool prefetch_parameters = false;
  CoordinatorOptions coordinator;

  // Checkpoints (empty: none). The job starts from the newest valid
  // checkpoint there when `restore` is set (a restarted coordinator
  // resumes), and writes one after every `checkpoint_every_epochs` epochs
  // and after the last, keeping `keep_checkpoints`. Recovery from a failed
  // parameter server needs them.
  std::string checkpoint_dir;
  int checkpoint_every_epochs = 1;
  int keep_checkpoints = 3;
  bool restore = true;
  // Restore the newest valid checkpoint in checkpoint_dir, evaluate it on
  // the whole test set and end: nothing is trained or written to the
  // checkpoints. The figures do not depend on how many workers evaluate.
  bool evaluate_only = false;
  // How long a failed parameter server may take to come back.
  absl::Duration ps_recovery_timeout = absl::Minutes(5);
  // How often every parameter server is asked whether it is alive and
  // still holds its shards; 0 turns the heartbeat off.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // After its epochs the job waits for commands (tessera_ctl schedule,
  // checkpoint, stop) instead of ending.
  bool wait_for_commands = false;
};

struct EpochResult {
  int epoch = 0;
  int64_t steps = 0;
  int64_t examples = 0;
  double train_loss = 0;
  double train_accuracy = 0;
  double test_loss = 0;
  double test_accuracy = 0;
  // Models with one sigmoid output (ctr): exact ROC AUC and log loss over
  // the whole test set; -1 for other models.
  double auc = -1;
  double log_loss = -1;
  double seconds = 0;
  double examples_per_second = 0;
  // Async and ssp: how many updates landed between a push's pull and its
  // own update, counted per pushed shard (staleness -> pushes).
  std::map<int64_t, int64_t> staleness;
  // Sync with backup workers: shard gradients dropped as late.
  int64_t late_shards = 0;
};

// The coordinator's job from start to end: wait for the cluster, create
// the variables through the partitioner, configure the workers with their
// dataset shards, run the epochs (schedule every step, join at the epoch
// boundary, evaluate), report, and stop the cluster.
class TrainingJob {
 public:
  TrainingJob(ClusterSpec cluster, JobConfig job, VariablePlan plan,
              TrainingJobOptions options);
  ~TrainingJob();

  absl::Status Run();

  const std::vector<EpochResult>& results() const { return results_; }
  // A snapshot for the Coordinator service, with every worker's progress
  // and every parameter server's state (asked for now); any thread.
  JobStatus status() const;
  // What tessera_ctl asks of the job; any thread.
  JobControl* control() { return &control_; }
  // Stops the job after the steps in flight; any thread.
  void Stop(const std::string& reason);

 private:
  absl::Status WaitForCluster();
  absl::Status CreateVariables();
  // Restores the newest valid checkpoint, or writes the first one (step 0)
  // when there is none, so a server failure in the first epoch can be
  // recovered from too. Returns where the job resumes.
  absl::StatusOr<JobPosition> StartFromCheckpoint();
  // --evaluate_only: restores the newest checkpoint and evaluates it.
  absl::Status EvaluateCheckpoint();
  // Called with the error that ended an epoch. When a parameter server
  // failed (it does not answer, or answers without its shards) and there
  // is a checkpoint: waits for the server to come back, re-creates its
  // shards, restores every server from the newest valid checkpoint (so all
  // shards agree on one step) and returns the position to resume at.
  // Otherwise returns `error`.
  absl::StatusOr<JobPosition> RecoverFromPsFailure(const absl::Status& error);
  // Parameter servers that do not answer or have lost shards, with why.
  std::vector<std::string> FailedServers();
  void HeartbeatLoop();
  // What worker w needs for the job, with the dataset shard [begin, end).
  absl::StatusOr<WorkerConfig> MakeWorkerConfig(int w, int64_t begin,
                                                int64_t end) const;
  // The training and test set sizes, as worker 0 reads them.
  absl::StatusOr<std::pair<int64_t, int64_t>> ProbeDataSizes();
  absl::Status ConfigureWorkers(const DataPlan& data);
  absl::Status RunEpoch(int epoch, DataPlan* data, EpochResult* result);
  // Runs `steps` (of epoch `epoch`, or of extra steps), shown as `label`.
  absl::Status RunPlannedSteps(std::vector<PlannedStep> steps, int epoch,
                               const DataPlan& data, const std::string& label,
                               EpochResult* result);
  // Sync and mirrored: one global step (a round of per-worker steps) at a
  // time.
  absl::Status RunLockstepEpoch(std::vector<PlannedStep> steps,
                                const DataPlan& data, int epoch,
                                ProgressMeter* meter, EpochResult* result,
                                int64_t* correct);
  StepRequest MakeRequest(int epoch, const PlannedStep& planned,
                          const DataPlan& data);
  // Adds a finished step to the epoch's figures and the step log.
  void Record(const StepResponse& response, int64_t step, ProgressMeter* meter,
              EpochResult* result, int64_t* correct);
  absl::Status Evaluate(EpochResult* result);
  // Evaluates `request` (the slice of worker `owner`, whose own attempt
  // failed with `failure`) on whichever worker answers, restoring a
  // restarted one first, until the worker recovery timeout. A failure of a
  // worker that is up and configured is the job's (bad data), returned as
  // is.
  absl::Status EvaluateElsewhere(int owner, const EvaluateRequest& request,
                                 absl::Status failure,
                                 EvaluateResponse* response);
  // Runs `steps` more steps (global steps in lockstep modes) continuing
  // the data order, evaluates, and reports them.
  absl::Status RunExtraSteps(int64_t steps, DataPlan* data);
  // Serves tessera_ctl after the epochs: checkpoints, extra steps, stop.
  absl::Status ServeCommands(DataPlan* data, int epoch);
  // Writes a checkpoint at `position` and tells waiting operators.
  absl::StatusOr<std::string> SaveCheckpoint(const JobPosition& position);
  // Internal error when a one-pass epoch did not train on every example
  // exactly once.
  absl::Status CheckEpochCoverage(const EpochResult& result,
                                  int64_t train_examples) const;
  void WriteMetrics(const EpochResult& result);
  // accuracy.svg and loss.svg in the run folder, redrawn every epoch.
  void WriteCharts() const;
  // A write to the run folder or a checkpoint that failed: said at once on
  // stdout and in the log, counted, and the job ends with an error naming
  // the first (never "done" with metrics or checkpoints missing).
  void RecordWriteFailure(const std::string& what) const;
  // Checks `out` after a write of `file` (flushing it) and records a
  // failure with errno's reason.
  void CheckWritten(std::ostream& out, const std::string& file) const;
  void PrintSummary(absl::Duration wall) const;
  void ShutdownCluster();

  const ClusterSpec cluster_;
  const JobConfig job_;
  const VariablePlan plan_;
  const TrainingJobOptions options_;
  TrainingMode mode_;
  absl::Status mode_error_;  // a mode this cluster cannot run

  std::vector<std::unique_ptr<PsClient>> ps_;
  // Shards each parameter server holds once the variables exist.
  std::vector<int64_t> expected_shards_;
  std::unique_ptr<JobCheckpointer> checkpointer_;
  JobControl control_;
  // Steps of a started epoch that extra steps have not used yet.
  std::deque<PlannedStep> extra_plan_;
  int64_t extra_steps_run_ = 0;
  const absl::Time start_time_ = absl::Now();
  std::vector<RemoteWorker*> workers_;  // owned by coordinator_
  std::unique_ptr<ClusterCoordinator> coordinator_;
  int64_t next_step_ = 0;
  int64_t next_global_step_ = 0;             // sync and mirrored
  std::ofstream step_log_;                   // steps.jsonl in the run folder
  std::unique_ptr<EventFileWriter> events_;  // tensorboard/ in the run folder
  int64_t test_examples_ = 0;
  // Model ctr: the generator's best achievable test AUC (meta.json beside
  // the test file), -1 when unknown.
  double best_auc_ = -1;
  std::vector<EpochResult> results_;

  // The heartbeat aborts the running steps once per failure; recovery
  // holds it off while it restores.
  absl::Mutex heartbeat_mu_;
  bool recovering_ ABSL_GUARDED_BY(heartbeat_mu_) = false;
  bool stop_heartbeat_ ABSL_GUARDED_BY(heartbeat_mu_) = false;
  std::thread heartbeat_;

  mutable absl::Mutex failures_mu_;
  mutable std::vector<std::string> write_failures_
      ABSL_GUARDED_BY(failures_mu_);
  mutable absl::Mutex status_mu_;
  JobStatus status_ ABSL_GUARDED_BY(status_mu_);
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_TRAINING_JOB_H_
