#ifndef TESSERA_COORDINATOR_JOB_SETUP_H_
#define TESSERA_COORDINATOR_JOB_SETUP_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/training_mode.h"
#include "coordinator/cluster_health.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/ps_recovery.h"
#include "coordinator/step_plan.h"
#include "coordinator/variable_plan.h"
#include "coordinator/worker_task.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"

namespace tessera {

struct JobSetupOptions {
  // How many workers (or parameter servers) are configured or created
  // variables on at once.
  int startup_concurrency = 32;
  // How long a parameter server that died may take to come back.
  absl::Duration ps_recovery_timeout = absl::Minutes(5);
  // How long a worker that does not answer its configuration is waited for.
  absl::Duration worker_recovery_timeout = absl::Minutes(5);
  // Workers pull the next step's parameters while a step computes.
  bool prefetch_parameters = false;
};

// How a job sets its cluster up: the variables on the parameter servers
// (`served`: what they hold of `plan`), the data sizes and plan (worker 0
// counts the data: the coordinator never reads it), and each worker's
// configuration, several at once; also the job's first model, from its
// own newest checkpoint or a warm start.
//
// Contract: call ProbeDataSizes before PlanData, ConfigureWorkers or
// JoinConfig, which use the sizes it found. A parameter server or worker
// that dies meanwhile is waited for (ps_recovery_timeout,
// worker_recovery_timeout), as its launcher restarts it. `checkpointer`
// may be null (no checkpoints). Not thread-safe, except JoinConfig and
// the accessors once ProbeDataSizes returned.
class JobSetup {
 public:
  JobSetup(JobConfig job, VariablePlan plan, VariablePlan served,
           absl::flat_hash_set<std::string> replicated, TrainingMode mode,
           std::vector<PsClient*> ps, std::vector<WorkerTask*> workers,
           ClusterHealth* health, JobCheckpointer* checkpointer, std::FILE* out,
           JobSetupOptions options);

  // Mirrored and hybrid: a chief that restarted may find a worker inside
  // an all-reduce its peer left; that call ends now, and the workers'
  // configurations restart every all-reduce at one new epoch.
  void InterruptCollectives();
  // The training and test set sizes, as worker 0 reads them; for streamed
  // data also the files' assignment to shards.
  absl::Status ProbeDataSizes();
  // The step plan as it is at the start of epoch `epoch`.
  absl::StatusOr<std::unique_ptr<StepPlan>> PlanData(int epoch) const;
  // Creates the variables on the parameter servers (idempotent).
  absl::Status CreateVariables();
  // CreateVariables, waiting for a parameter server that died meanwhile.
  absl::Status CreateServerVariables();
  // Configures every worker with its dataset shard.
  absl::Status ConfigureWorkers();
  // The configuration of joining worker `index`, which will serve queue
  // `queue`'s shard (ElasticJoins::JoinConfig).
  absl::StatusOr<WorkerConfig> JoinConfig(int index, int queue) const;
  // PsRecovery::Start (restore the newest checkpoint, or write the first),
  // again from the start while a parameter server that died comes back.
  absl::StatusOr<JobPosition> StartFromCheckpoint(PsRecovery* recovery);
  // A job that resumes no checkpoint of its own: the variables' first
  // values from the checkpoint root `root` (ps_recovery.h WarmStart).
  absl::Status WarmStartFrom(const std::string& root);
  // Whether failure `s` came from a parameter server that died or lost
  // its shards, and may come back.
  bool ServerMayComeBack(const absl::Status& s) const;

  int64_t train_examples() const { return train_examples_; }
  int64_t test_examples() const { return test_examples_; }
  // Model ctr: the generator's best achievable test AUC (meta.json beside
  // the test file), -1 when unknown.
  double best_auc() const { return best_auc_; }

 private:
  // What worker w needs for the job, with the dataset shard [begin, end)
  // (streamed data: every shard of the stream and the test files).
  absl::StatusOr<WorkerConfig> MakeWorkerConfig(int w, int64_t begin,
                                                int64_t end) const;
  // Configures worker w, waiting (with the backoff of common/rpc/backoff.h,
  // for up to worker_recovery_timeout) while it does not answer. Several
  // workers may be configured at once.
  absl::Status ConfigureWorker(int w, const WorkerConfig& config,
                               ConfigureResponse* response);

  const JobConfig job_;
  const VariablePlan plan_;
  const VariablePlan served_;
  // The tables the workers keep whole (mirrored, hybrid).
  const absl::flat_hash_set<std::string> replicated_;
  const TrainingMode mode_;
  const std::vector<PsClient*> ps_;
  // The workers the job started with, one dataset shard each.
  const std::vector<WorkerTask*> workers_;
  ClusterHealth* const health_;
  JobCheckpointer* const checkpointer_;
  std::FILE* const out_;
  const JobSetupOptions options_;

  // Mirrored and hybrid: the all-reduce epoch of this chief's workers.
  uint64_t collective_epoch_ = 0;
  int64_t train_examples_ = 0;
  int64_t test_examples_ = 0;
  double best_auc_ = -1;
  // Streamed data (tfrecord, csv): each worker's shard of the files, as
  // worker 0 assigned them, and the test files. Empty otherwise.
  std::vector<StreamShard> train_shards_;
  std::vector<FileSlice> test_files_;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_JOB_SETUP_H_
