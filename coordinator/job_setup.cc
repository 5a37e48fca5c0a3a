#include "coordinator/job_setup.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model/model_presets.h"
#include "common/model/variable_optimizer.h"
#include "common/rpc/backoff.h"
#include "coordinator/data_plan.h"
#include "coordinator/job_config.h"
#include "coordinator/parallel/bounded_for_each.h"
#include "coordinator/report/job_summary.h"
#include "glog/logging.h"

namespace tessera {

JobSetup::JobSetup(JobConfig job, VariablePlan plan, VariablePlan served,
                   absl::flat_hash_set<std::string> replicated,
                   TrainingMode mode, std::vector<PsClient*> ps,
                   std::vector<WorkerTask*> workers, ClusterHealth* health,
                   JobCheckpointer* checkpointer, std::FILE* out,
                   JobSetupOptions options)
    : job_(std::move(job)),
      plan_(std::move(plan)),
      served_(std::move(served)),
      replicated_(std::move(replicated)),
      mode_(mode),
      ps_(std::move(ps)),
      workers_(std::move(workers)),
      health_(health),
      checkpointer_(checkpointer),
      out_(out),
      options_(options) {}

void JobSetup::InterruptCollectives() {
  if (!mode_.replicates_dense()) return;
  // A chief that restarted may find a worker inside an all-reduce that
  // its peer left (it ran more of the last chief's queued rounds): that
  // call, which would wait until its deadline and hold the worker's
  // configuration behind it, ends now, and the configuration restarts
  // every worker's all-reduce at one epoch (WorkerConfig).
  collective_epoch_ = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  for (WorkerTask* w : workers_) w->Interrupt("a chief configures the job");
}

absl::StatusOr<JobPosition> JobSetup::StartFromCheckpoint(
    PsRecovery* recovery) {
  // A server that dies while the checkpoint is restored (or the first one
  // written) lost what it had been given: wait for it, create its shards
  // and restore again, from the same checkpoint.
  const absl::Time deadline = absl::Now() + options_.ps_recovery_timeout;
  Backoff backoff;
  while (true) {
    absl::StatusOr<JobPosition> position = recovery->Start();
    if (position.ok() || absl::Now() >= deadline ||
        !ServerMayComeBack(position.status())) {
      return position;
    }
    std::fprintf(out_,
                 "starting from the checkpoints failed (%s); waiting for the "
                 "parameter servers and trying again\n",
                 std::string(position.status().message()).c_str());
    std::fflush(out_);
    absl::SleepFor(backoff.Next());
    if (absl::Status w = health_->WaitForServers(deadline - absl::Now());
        !w.ok()) {
      return w;
    }
    if (absl::Status c = CreateServerVariables(); !c.ok()) return c;
  }
}

absl::Status JobSetup::CreateVariables() {
  if (!mode_.uses_parameter_servers()) return absl::OkStatus();
  // Embedding tables and dense layers may train with different
  // optimizers; a parameter server takes one per request.
  std::vector<std::vector<CreateShardsRequest>> requests =
      ShardRequestsByKind(served_, job_, static_cast<int>(ps_.size()));
  std::vector<int64_t> expected(ps_.size(), 0);
  for (size_t k = 0; k < ps_.size(); ++k) {
    for (const CreateShardsRequest& request : requests[k]) {
      expected[k] += request.shards_size();
    }
  }
  // The servers at once; each server's requests in order.
  if (absl::Status s = BoundedForEach(
          static_cast<int>(ps_.size()), options_.startup_concurrency,
          [&](int k) {
            for (const CreateShardsRequest& request : requests[k]) {
              CreateShardsResponse response;
              if (absl::Status s = ps_[k]->CreateShards(request, &response);
                  !s.ok()) {
                return s;
              }
              LOG(INFO) << "ps " << k << ": " << response.created()
                        << " shards created, " << response.existing()
                        << " already there";
            }
            return absl::OkStatus();
          });
      !s.ok()) {
    return s;
  }
  if (checkpointer_ != nullptr) checkpointer_->ExpectShards(expected);
  health_->ExpectShards(std::move(expected));
  return absl::OkStatus();
}

absl::Status JobSetup::WarmStartFrom(const std::string& root) {
  if (ps_.empty() || mode_.replicates_dense()) {
    return absl::InvalidArgumentError(
        "--init_checkpoint needs the dense variables on parameter servers "
        "(mirrored and hybrid training start from the initializers)");
  }
  JobCheckpointer init(root, 1, ps_, job_);
  return WarmStart(root, init, out_);
}

bool JobSetup::ServerMayComeBack(const absl::Status& s) const {
  return IsTransient(s) || !health_->FailedServers().empty();
}

absl::Status JobSetup::CreateServerVariables() {
  // A parameter server that dies before training starts is restarted by
  // its launcher and then holds nothing: wait for it and create again
  // (creating is idempotent: a server keeps the shards it has).
  const absl::Time deadline = absl::Now() + options_.ps_recovery_timeout;
  Backoff backoff;
  while (true) {
    absl::Status s = CreateVariables();
    if (s.ok() || absl::Now() >= deadline || !ServerMayComeBack(s)) return s;
    std::fprintf(out_,
                 "creating the variables failed (%s); waiting for the "
                 "parameter servers\n",
                 std::string(s.message()).c_str());
    std::fflush(out_);
    absl::SleepFor(backoff.Next());
    if (absl::Status w = health_->WaitForServers(deadline - absl::Now());
        !w.ok()) {
      return w;
    }
  }
}

absl::StatusOr<WorkerConfig> JobSetup::MakeWorkerConfig(int w, int64_t begin,
                                                        int64_t end) const {
  absl::StatusOr<ModelDef> model = JobModel(job_);
  if (!model.ok()) return model.status();
  WorkerConfig config;
  config.set_worker_index(w);
  config.set_collective_epoch(collective_epoch_);
  *config.mutable_model_def() = *std::move(model);
  *config.mutable_data() = job_.data();
  for (const VariablePlacement& p : Placements(served_)) {
    *config.add_variables() = p;
  }
  config.set_seed(job_.schedule().seed());
  config.set_train_begin(begin);
  config.set_train_end(end);
  // Every worker gets every shard, so that any worker can run any shard's
  // step again; it streams its own unless asked otherwise.
  for (const StreamShard& shard : train_shards_) {
    *config.add_train_shards() = shard;
  }
  for (const FileSlice& file : test_files_) *config.add_test_files() = file;
  // A prefetched pull could miss the previous global step's update.
  config.set_prefetch_parameters(options_.prefetch_parameters &&
                                 !mode_.lockstep());
  config.set_mode(mode_.ToString());
  *config.mutable_optimizer() = job_.optimizer();
  config.set_num_workers(static_cast<int>(workers_.size()));
  for (const VariableDef& v : plan_.variables) {
    if (!v.sparse) continue;
    (*(replicated_.contains(v.name)
           ? config.mutable_replicated_tables()
           : config.mutable_sharded_tables()))[v.name] =
        VariableOptimizer(job_, v);
  }
  return config;
}

absl::StatusOr<WorkerConfig> JobSetup::JoinConfig(int index, int queue) const {
  // The shard it will serve, loaded as it is configured, as at start-up.
  int64_t begin = 0, end = 0;
  if (train_shards_.empty()) {
    absl::StatusOr<DataPlan> split = DataPlan::Create(
        train_examples_, static_cast<int>(workers_.size()), 1, 0, 0);
    if (split.ok()) {
      begin = split->shards()[queue].begin;
      end = split->shards()[queue].end;
    }
  }
  return MakeWorkerConfig(index, begin, end);
}

absl::Status JobSetup::ProbeDataSizes() {
  // The workers read the data, the coordinator never does: worker 0,
  // configured with an empty shard, reports the sizes (after the job's
  // caps) that the data plan needs. Its real shard comes with the plan.
  absl::StatusOr<WorkerConfig> config = MakeWorkerConfig(0, 0, 0);
  if (!config.ok()) return config.status();
  ConfigureResponse response;
  if (absl::Status s = ConfigureWorker(0, *config, &response); !s.ok()) {
    return s;
  }
  train_examples_ = response.train_total();
  test_examples_ = response.test_examples();
  // Streamed data: worker 0 globbed, counted and assigned the files (the
  // coordinator never reads the data, which it may not even see).
  train_shards_.assign(response.train_shards().begin(),
                       response.train_shards().end());
  test_files_.assign(response.test_files().begin(),
                     response.test_files().end());
  if (!train_shards_.empty() && train_shards_.size() != workers_.size()) {
    return absl::InternalError(
        absl::StrCat("worker 0 assigned the files to ", train_shards_.size(),
                     " shards for ", workers_.size(), " workers"));
  }
  if (job_.data().format() == "criteo") {
    best_auc_ = ReadBestAuc(job_.data().test_path());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<StepPlan>> JobSetup::PlanData(int epoch) const {
  // In sync and mirrored modes batch_size and steps_per_epoch count
  // global steps, each one batch per worker.
  const int n = static_cast<int>(workers_.size());
  const int64_t per_worker_batch = mode_.lockstep()
                                       ? job_.schedule().batch_size() / n
                                       : job_.schedule().batch_size();
  const int64_t steps = mode_.lockstep() ? job_.schedule().steps_per_epoch() * n
                                         : job_.schedule().steps_per_epoch();
  std::unique_ptr<StepPlan> plan;
  if (!train_shards_.empty()) {
    std::vector<int64_t> sizes;
    for (const StreamShard& shard : train_shards_) {
      int64_t records = 0;
      for (const FileSlice& slice : shard.slices()) {
        records += slice.end() - slice.begin();
      }
      sizes.push_back(records);
    }
    absl::StatusOr<StreamPlan> streams =
        StreamPlan::Create(std::move(sizes), per_worker_batch, steps);
    if (!streams.ok()) return streams.status();
    plan = PlanOfStreams(*std::move(streams));
  } else {
    absl::StatusOr<DataPlan> examples = DataPlan::Create(
        train_examples_, n, per_worker_batch, steps, job_.schedule().seed());
    if (!examples.ok()) return examples.status();
    plan = PlanOfExamples(*std::move(examples));
  }
  // Plans are reproducible: epoch e's steps follow from the e-1 before, so
  // a checkpoint's epoch is where every shard's permutation or stream
  // stands.
  for (int e = 1; e < epoch; ++e) plan->NextEpoch();
  return plan;
}

absl::Status JobSetup::ConfigureWorker(int w, const WorkerConfig& config,
                                       ConfigureResponse* response) {
  // A worker that dies now is restarted by its launcher and answers again:
  // it is waited for as a step's worker is, not the end of the job.
  const absl::Duration wait = options_.worker_recovery_timeout;
  bool told = false;
  absl::Status s = RetryTransientUntil(absl::Now() + wait, [&] {
    response->Clear();
    absl::Status attempt = workers_[w]->Configure(config, response);
    if (IsTransient(attempt) && !told) {
      told = true;
      std::fprintf(out_,
                   "worker %d could not be configured (%s); waiting up to %s "
                   "for it to come back\n",
                   w, std::string(attempt.message()).c_str(),
                   absl::FormatDuration(wait).c_str());
      std::fflush(out_);
    }
    return attempt;
  });
  if (s.ok() && told) LOG(INFO) << "worker " << w << " is back and configured";
  return s;
}

absl::Status JobSetup::ConfigureWorkers() {
  // In-memory data: each worker holds its contiguous shard, as DataPlan
  // splits the examples. Streamed data: every worker is sent the shards.
  std::vector<DataShard> shards(workers_.size());
  if (train_shards_.empty()) {
    absl::StatusOr<DataPlan> split = DataPlan::Create(
        train_examples_, static_cast<int>(workers_.size()), 1, 0, 0);
    if (!split.ok()) return split.status();
    shards = split->shards();
  }
  // At once, a bounded number at a time: each worker reads and checks its
  // data as it is configured, which one after another added up to seconds
  // with tens of workers. The first failure (by worker index) is the job's,
  // as in a loop, and names its worker.
  return BoundedForEach(
      static_cast<int>(workers_.size()), options_.startup_concurrency,
      [&](int w) {
        absl::StatusOr<WorkerConfig> config =
            MakeWorkerConfig(w, shards[w].begin, shards[w].end);
        if (!config.ok()) return config.status();
        ConfigureResponse response;
        if (absl::Status s = ConfigureWorker(w, *config, &response); !s.ok()) {
          return s;
        }
        LOG(INFO) << "worker " << w << " on " << response.device() << ": "
                  << response.train_examples() << " training examples ["
                  << config->train_begin() << ", " << config->train_end()
                  << ")";
        return absl::OkStatus();
      });
}

}  // namespace tessera
