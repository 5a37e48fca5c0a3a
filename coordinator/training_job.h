#ifndef TESSERA_COORDINATOR_TRAINING_JOB_H_
#define TESSERA_COORDINATOR_TRAINING_JOB_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/training_mode.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/cluster_health.h"
#include "coordinator/control/elastic_control.h"
#include "coordinator/control/job_control.h"
#include "coordinator/control/job_status_board.h"
#include "coordinator/data_plan.h"
#include "coordinator/epoch_loop.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/job_cluster.h"
#include "coordinator/job_setup.h"
#include "coordinator/membership/elastic_joins.h"
#include "coordinator/membership/membership.h"
#include "coordinator/operator_commands.h"
#include "coordinator/ps_recovery.h"
#include "coordinator/replica_repair.h"
#include "coordinator/report/epoch_result.h"
#include "coordinator/report/metrics_writer.h"
#include "coordinator/step_norm_exchange.h"
#include "coordinator/step_plan.h"
#include "coordinator/step_runner.h"
#include "coordinator/test_set_evaluator.h"
#include "coordinator/variable_plan.h"
#include "coordinator/worker_replicas.h"
#include "proto/coordinator_service.pb.h"
#include "proto/job.pb.h"

namespace tessera {

struct TrainingJobOptions {
  std::string run_dir;  // metrics.jsonl goes here when set
  // Where progress, results and errors are printed.
  std::FILE* out = stdout;
  // How long to wait for every parameter server and worker to answer.
  absl::Duration cluster_wait = absl::Seconds(60);
  // How many workers (or parameter servers) are waited for, configured,
  // created variables on or shut down at once: each worker reads its data
  // when configured, so one after another start-up grows with the workers.
  int startup_concurrency = 32;
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
  // Checkpoints inside epochs too (0 / zero: none): at the first step
  // boundary this many steps (global steps in lockstep modes) or this long
  // after the last one (EpochLoopOptions).
  int64_t checkpoint_every_steps = 0;
  absl::Duration checkpoint_every = absl::ZeroDuration();
  int keep_checkpoints = 3;
  bool restore = true;
  // A checkpoint root to take the variables' first values from when the
  // job does not resume one of its own (ps_recovery.h WarmStart).
  std::string init_checkpoint;
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

  // Elastic jobs (ElasticJoins): how to reach a worker that
  // joins (a RemoteWorker with the job's security; empty: no worker can
  // join), and the job's tasks as the coordinator was started with them
  // (job name -> addresses), from which a joining worker gets its cluster.
  std::function<std::unique_ptr<WorkerTask>(const std::string& address,
                                            int index)>
      connect_worker;
  std::map<std::string, std::vector<std::string>> cluster_jobs;
};

// The coordinator's job from start to end: wait for the cluster, set it
// up, run the epochs, serve operators' commands, report, and stop the
// cluster. TrainingJob wires the parts, each one concept with its own
// header: JobSetup (variables, data plan, worker configurations, the
// first restore), EpochLoop (epochs, evaluation, checkpoint cadence,
// recovery and resume), OperatorCommands (tessera_ctl after the epochs),
// ElasticJoins (workers joining and draining while it trains), and
// ClusterHealth, PsRecovery, StepRunner, TestSetEvaluator, MetricsWriter.
//
// Elastic: workers join (AddWorker) and drain (DrainWorker) while it runs
// (ElasticJoins), and with CoordinatorOptions::remove_lost_workers a
// worker that does not come back is removed; ClusterCoordinator moves the
// steps, Membership keeps who is in the job.
class TrainingJob : public ElasticControl {
 public:
  TrainingJob(JobCluster cluster, JobConfig job, VariablePlan plan,
              TrainingJobOptions options);
  ~TrainingJob() override;

  absl::Status Run();

  // Epochs and extra steps, in order.
  const std::vector<EpochResult>& results() const { return loop_->results(); }
  // A snapshot for the Coordinator service, with every worker's progress
  // and every parameter server's last health check; any thread, no RPC.
  JobStatus status() const;
  // What tessera_ctl asks of the job; any thread.
  JobControl* control() { return &control_; }
  // Stops the job after the steps in flight; any thread.
  void Stop(const std::string& reason);
  // After Run: whether an operator's stop ended the job before its epochs
  // were all trained.
  bool stopped_early() const { return loop_->stopped_early(); }

  // ElasticControl; any thread. Refused in mirrored and hybrid modes,
  // whose replicas meet in a ring of fixed size, and outside training.
  absl::StatusOr<AddWorkerResponse> AddWorker(
      const std::string& address) override;
  absl::StatusOr<int> DrainWorker(const std::string& worker) override;

 private:
  // Wiring, in the constructor's order. The mode this cluster runs (or
  // mode_error_), what the servers hold, whether there is an accuracy.
  void ResolveMode(int num_workers);
  // The ClusterCoordinator's options for the mode.
  CoordinatorOptions SchedulerOptions();
  // Checkpoints and the recovery from them (none without checkpoint_dir).
  void MakeCheckpoints(const std::vector<PsClient*>& clients);
  // The step runner, repairing a mirrored round's lost replica.
  void MakeRunner(int num_workers);
  void MakeEpochLoop();
  void MakeOperatorCommands();

  absl::Status RunJob();
  // The epochs, then operators' commands, then the end of a stop.
  absl::Status Train(const JobPosition& position);

  void ShutdownCluster();

  const JobConfig job_;
  const VariablePlan plan_;
  VariablePlan served_;  // what the parameter servers hold of plan_
  // The tables the workers keep whole (mirrored, hybrid).
  absl::flat_hash_set<std::string> replicated_;
  const TrainingJobOptions options_;
  std::FILE* const out_;
  TrainingMode mode_;
  absl::Status mode_error_;  // a mode this cluster cannot run

  std::vector<std::unique_ptr<PsClient>> ps_;
  // The workers the job started with, one dataset shard each (owned by
  // coordinator_); membership_ holds these and those that joined.
  std::vector<WorkerTask*> workers_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<ClusterCoordinator> coordinator_;
  JobStatusBoard board_;
  JobControl control_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<ClusterHealth> health_;
  std::unique_ptr<WorkerReplicas> replica_checkpoints_;  // mirrored, hybrid
  std::unique_ptr<ReplicaRepair> replica_repair_;        // with the above
  std::unique_ptr<JobCheckpointer> checkpointer_;
  std::unique_ptr<PsRecovery> recovery_;
  std::unique_ptr<StepNormExchange> step_norms_;  // null: servers don't clip
  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<TestSetEvaluator> evaluator_;
  std::unique_ptr<JobSetup> setup_;

  const absl::Time start_time_ = absl::Now();
  // While steps run, a stop waits for the next step boundary.
  std::atomic<bool> in_steps_{false};
  // False for a regression (mean-squared-error loss): no accuracy to
  // report (EpochResult::has_accuracy).
  bool has_accuracy_ = true;
  std::unique_ptr<EpochLoop> loop_;
  std::unique_ptr<OperatorCommands> commands_;

  // Joins and drains, taken while the epochs run.
  std::unique_ptr<ElasticJoins> joins_;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_TRAINING_JOB_H_
