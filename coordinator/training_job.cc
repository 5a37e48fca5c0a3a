#include "coordinator/training_job.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <ostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/backoff.h"
#include "common/binary_metrics.h"
#include "common/byte_codec.h"
#include "common/grpc_channel.h"
#include "common/model/model_presets.h"
#include "common/summary_histogram.h"
#include "coordinator/global_steps.h"
#include "coordinator/report/progress_meter.h"
#include "coordinator/report/svg_chart.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

// The generator's best achievable test AUC from meta.json in the test
// file's folder (worker/data/ctr_generator.h), or -1.
double ReadBestAuc(const std::string& test_path) {
  const size_t slash = test_path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : test_path.substr(0, slash);
  std::ifstream in(dir + "/meta.json");
  if (!in) return -1;
  nlohmann::json meta = nlohmann::json::parse(in, nullptr, false);
  if (meta.is_discarded() || !meta.contains("best_auc") ||
      !meta["best_auc"].is_number()) {
    return -1;
  }
  return meta["best_auc"].get<double>();
}

}  // namespace

TrainingJob::TrainingJob(ClusterSpec cluster, JobConfig job, VariablePlan plan,
                         TrainingJobOptions options)
    : cluster_(std::move(cluster)),
      job_(std::move(job)),
      plan_(std::move(plan)),
      options_(std::move(options)) {
  absl::StatusOr<TrainingMode> mode = ParseTrainingMode(job_.mode());
  if (mode.ok())
    mode_ = *mode;
  else
    mode_error_ = mode.status();
  const bool have_ps = !cluster_.tasks("ps").empty();
  if (!have_ps && mode_.kind == TrainingMode::Kind::kAsync &&
      (job_.mode().empty() || job_.mode() == "async")) {
    // As TF, a cluster without parameter servers trains mirrored.
    LOG(INFO) << "the cluster has no parameter servers: training mirrored";
    mode_.kind = TrainingMode::Kind::kMirrored;
  } else if (!have_ps && mode_.uses_parameter_servers()) {
    mode_error_ = absl::InvalidArgumentError(
        absl::StrCat("mode ", mode_.ToString(),
                     " needs parameter servers; the cluster has none (use "
                     "--mode=mirrored)"));
  }
  if (mode_.lockstep() &&
      job_.schedule().batch_size() % cluster_.tasks("worker").size() != 0) {
    mode_error_ = absl::InvalidArgumentError(
        absl::StrCat("mode ", mode_.ToString(), ": the global batch_size ",
                     job_.schedule().batch_size(), " must split evenly over ",
                     cluster_.tasks("worker").size(), " workers"));
  }
  if (job_.backup_workers() >=
      static_cast<int>(cluster_.tasks("worker").size())) {
    mode_error_ = absl::InvalidArgumentError(absl::StrCat(
        "backup_workers is ", job_.backup_workers(), " but there are only ",
        cluster_.tasks("worker").size(), " workers"));
  }
  CoordinatorOptions coordinator_options = options_.coordinator;
  if (mode_.kind == TrainingMode::Kind::kSsp) {
    coordinator_options.max_staleness = mode_.staleness;
  }
  if (mode_.kind == TrainingMode::Kind::kMirrored) {
    // Every replica takes part in every all-reduce with its own data.
    coordinator_options.steal_threshold = std::numeric_limits<int>::max();
  }
  const std::vector<std::string>& ps = cluster_.tasks("ps");
  for (size_t k = 0; k < ps.size(); ++k) {
    ps_.push_back(std::make_unique<PsClient>(ps[k], static_cast<int>(k),
                                             MakeChannel(ps[k])));
  }
  std::vector<std::unique_ptr<WorkerStub>> stubs;
  const std::vector<std::string>& workers = cluster_.tasks("worker");
  for (size_t w = 0; w < workers.size(); ++w) {
    auto remote =
        std::make_unique<RemoteWorker>(workers[w], static_cast<int>(w));
    workers_.push_back(remote.get());
    stubs.push_back(std::move(remote));
  }
  coordinator_ = std::make_unique<ClusterCoordinator>(std::move(stubs),
                                                      coordinator_options);
  if (!options_.checkpoint_dir.empty() && !ps_.empty() &&
      mode_.uses_parameter_servers()) {
    std::vector<PsClient*> clients;
    for (auto& p : ps_) clients.push_back(p.get());
    checkpointer_ = std::make_unique<JobCheckpointer>(options_.checkpoint_dir,
                                                      options_.keep_checkpoints,
                                                      std::move(clients), job_);
  }
  absl::MutexLock lock(&status_mu_);
  status_.set_epochs(job_.schedule().epochs());
}

TrainingJob::~TrainingJob() {
  {
    absl::MutexLock lock(&heartbeat_mu_);
    stop_heartbeat_ = true;
  }
  if (heartbeat_.joinable()) heartbeat_.join();
}

JobStatus TrainingJob::status() const {
  JobStatus status;
  {
    absl::MutexLock lock(&status_mu_);
    status = status_;
  }
  status.set_steps_rerun(coordinator_->steps_rerun());
  status.set_extra_steps_requested(control_.requested_steps());
  const double seconds =
      std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start_time_));
  const std::vector<std::pair<int64_t, bool>> progress =
      coordinator_->worker_progress();
  for (size_t w = 0; w < workers_.size(); ++w) {
    WorkerState* state = status.add_workers();
    state->set_index(static_cast<int>(w));
    state->set_address(workers_[w]->address());
    state->set_steps_done(progress[w].first);
    state->set_steps_per_second(progress[w].first / seconds);
    state->set_down(progress[w].second);
  }
  for (size_t k = 0; k < ps_.size(); ++k) {
    ServerState* state = status.add_servers();
    state->set_index(static_cast<int>(k));
    state->set_address(ps_[k]->address());
    HealthResponse health;
    absl::Status s = ps_[k]->Health(&health, kHealthCheckTimeoutS);
    state->set_up(s.ok());
    if (!s.ok()) {
      state->set_error(std::string(s.message()));
      continue;
    }
    state->set_num_shards(health.num_shards());
    state->set_resident_bytes(health.resident_bytes());
    state->set_uptime_ms(health.uptime_ms());
    state->set_pulls_served(health.pulls_served());
    state->set_pushes_served(health.pushes_served());
    state->set_calls_per_second(
        (health.pulls_served() + health.pushes_served()) /
        std::max(1e-3, health.uptime_ms() / 1e3));
  }
  return status;
}

void TrainingJob::Stop(const std::string& reason) {
  control_.Stop(reason);
  coordinator_->Abort(absl::CancelledError(absl::StrCat(
      "stopped by the operator", reason.empty() ? "" : ": ", reason)));
}

absl::StatusOr<std::string> TrainingJob::SaveCheckpoint(
    const JobPosition& position) {
  absl::StatusOr<std::string> saved =
      checkpointer_ != nullptr
          ? checkpointer_->Save(position)
          : absl::FailedPreconditionError(
                "this job writes no checkpoints (no --checkpoint_dir, or "
                "mirrored training)");
  if (saved.ok()) {
    absl::MutexLock lock(&status_mu_);
    status_.set_last_checkpoint(*saved);
  }
  if (control_.checkpoint_wanted()) control_.CheckpointWritten(saved);
  return saved;
}

absl::Status TrainingJob::RunExtraSteps(int64_t steps, DataPlan* data) {
  // In lockstep modes a step is a global step, one batch per worker.
  const int64_t planned =
      mode_.lockstep() ? steps * static_cast<int64_t>(workers_.size()) : steps;
  const int epoch = job_.schedule().epochs() + 1;
  const std::string label = absl::StrFormat("steps %d-%d", extra_steps_run_ + 1,
                                            extra_steps_run_ + steps);
  // At most an epoch's plan at a time, so a large request (tessera_ctl
  // schedule 100000000) holds one epoch of example ids, not all of them.
  EpochResult result;
  for (int64_t left = planned; left > 0;) {
    if (extra_plan_.empty()) {
      std::vector<PlannedStep> next = data->NextEpoch();
      if (next.empty()) {
        return absl::FailedPreconditionError("the data plan has no steps");
      }
      extra_plan_.assign(std::make_move_iterator(next.begin()),
                         std::make_move_iterator(next.end()));
    }
    std::vector<PlannedStep> taken;
    while (left > 0 && !extra_plan_.empty()) {
      taken.push_back(std::move(extra_plan_.front()));
      extra_plan_.pop_front();
      --left;
    }
    EpochResult part;
    if (absl::Status s =
            RunPlannedSteps(std::move(taken), epoch, *data, label, &part);
        !s.ok()) {
      return s;
    }
    result = part;  // what is printed: the last part's figures
  }
  if (absl::Status s = Evaluate(&result); !s.ok()) return s;
  extra_steps_run_ += steps;
  std::printf(
      "%s: train loss %.4f, train accuracy %.4f, test loss %.4f, test "
      "accuracy %.4f, %.0f examples/s\n",
      label.c_str(), result.train_loss, result.train_accuracy, result.test_loss,
      result.test_accuracy, result.examples_per_second);
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status TrainingJob::ServeCommands(DataPlan* data, int epoch) {
  auto set_state = [this](const char* state) {
    absl::MutexLock lock(&status_mu_);
    status_.set_state(state);
  };
  while (true) {
    if (control_.stop_requested()) return absl::OkStatus();
    if (control_.checkpoint_wanted()) {
      // Past the epochs: a restored job has no epoch left to run; extra
      // steps are the operator's to schedule again.
      JobPosition position;
      position.global_step = next_step_;
      position.epoch = epoch;
      position.next_sync_step = next_global_step_;
      SaveCheckpoint(position).IgnoreError();  // the caller gets the error
      continue;
    }
    if (const int64_t steps = control_.TakeSteps(); steps > 0) {
      set_state("training");
      absl::Status s = RunExtraSteps(steps, data);
      if (!s.ok() && control_.stop_requested()) return absl::OkStatus();
      if (!s.ok()) return s;
      control_.StepsDone(steps);
      continue;
    }
    if (!options_.wait_for_commands) return absl::OkStatus();
    set_state("waiting for commands");
    std::printf(
        "waiting for commands (tessera_ctl schedule|checkpoint|stop)\n");
    std::fflush(stdout);
    control_.WaitForWork();
  }
}

absl::Status TrainingJob::WaitForCluster() {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.cluster_wait;
  // A line every few seconds while a task does not answer (an unresolvable
  // host otherwise meant a silent minute), naming the task and why.
  constexpr absl::Duration kReportEvery = absl::Seconds(5);
  absl::Time next_report = start + kReportEvery;
  auto probe = [&](const std::string& who, auto& task) {
    HealthResponse h;
    absl::Status s = task.Health(&h, kHealthCheckTimeoutS);
    if (!s.ok() && absl::Now() >= next_report) {
      next_report = absl::Now() + kReportEvery;
      std::printf("waiting for %s: %s (%.0f s of %.0f s)\n", who.c_str(),
                  std::string(s.message()).c_str(),
                  absl::ToDoubleSeconds(absl::Now() - start),
                  absl::ToDoubleSeconds(options_.cluster_wait));
      std::fflush(stdout);
    }
    return s;
  };
  for (size_t k = 0; k < ps_.size(); ++k) {
    const std::string who =
        absl::StrCat("parameter server ", k, " (", ps_[k]->address(), ")");
    absl::Status s = RetryUntil(deadline, [&] { return probe(who, *ps_[k]); });
    if (!s.ok()) {
      return absl::UnavailableError(absl::StrCat(
          who, " did not answer within ",
          absl::FormatDuration(options_.cluster_wait), ": ", s.message()));
    }
  }
  for (size_t w = 0; w < workers_.size(); ++w) {
    const std::string who =
        absl::StrCat("worker ", w, " (", workers_[w]->address(), ")");
    absl::Status s =
        RetryUntil(deadline, [&] { return probe(who, *workers_[w]); });
    if (!s.ok()) {
      return absl::UnavailableError(absl::StrCat(
          who, " did not answer within ",
          absl::FormatDuration(options_.cluster_wait), ": ", s.message()));
    }
  }
  LOG(INFO) << "cluster ready: " << ps_.size() << " parameter servers, "
            << workers_.size() << " workers";
  return absl::OkStatus();
}

absl::Status TrainingJob::CreateVariables() {
  if (!mode_.uses_parameter_servers()) return absl::OkStatus();
  // Embedding tables and dense layers may train with different
  // optimizers; a parameter server takes one per request.
  std::vector<std::vector<CreateShardsRequest>> requests =
      ShardRequestsByKind(plan_, job_, static_cast<int>(ps_.size()));
  expected_shards_.assign(ps_.size(), 0);
  for (size_t k = 0; k < ps_.size(); ++k) {
    for (const CreateShardsRequest& request : requests[k]) {
      expected_shards_[k] += request.shards_size();
      CreateShardsResponse response;
      if (absl::Status s = ps_[k]->CreateShards(request, &response); !s.ok()) {
        return s;
      }
      LOG(INFO) << "ps " << k << ": " << response.created()
                << " shards created, " << response.existing()
                << " already there";
    }
  }
  if (checkpointer_ != nullptr) checkpointer_->ExpectShards(expected_shards_);
  return absl::OkStatus();
}

absl::Status TrainingJob::EvaluateCheckpoint() {
  if (checkpointer_ == nullptr) {
    return absl::FailedPreconditionError(
        "--evaluate_only needs --checkpoint_dir");
  }
  std::vector<std::string> rejected;
  absl::StatusOr<ValidCheckpoint> latest = checkpointer_->Latest(&rejected);
  for (const std::string& why : rejected) {
    std::printf("checkpoint rejected: %s\n", why.c_str());
  }
  if (!latest.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--evaluate_only: no checkpoint to evaluate in ",
                     checkpointer_->root(), ": ", latest.status().message()));
  }
  if (absl::Status s = checkpointer_->Restore(*latest); !s.ok()) return s;
  EpochResult result;
  result.epoch = latest->manifest.epoch() - 1;
  const absl::Time start = absl::Now();
  if (absl::Status s = Evaluate(&result); !s.ok()) return s;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf(
      "evaluated %s (after epoch %d) on %lld test examples with %zu "
      "workers: test loss %.4f, test accuracy %.4f\n",
      latest->path.c_str(), result.epoch,
      static_cast<long long>(test_examples_), workers_.size(), result.test_loss,
      result.test_accuracy);
  if (result.auc >= 0) {
    std::printf(
        "evaluated: test AUC %.6f (best achievable %s), test log "
        "loss %.6f\n",
        result.auc,
        best_auc_ >= 0 ? absl::StrFormat("%.4f", best_auc_).c_str() : "unknown",
        result.log_loss);
  }
  std::fflush(stdout);
  WriteMetrics(result);
  return absl::OkStatus();
}

absl::StatusOr<JobPosition> TrainingJob::StartFromCheckpoint() {
  if (!options_.restore) {
    // This run's checkpoints would mix with the earlier run's: pruning
    // would keep the newer of them, and recovering from a failed parameter
    // server would restore the other run's model.
    absl::StatusOr<std::optional<std::string>> old =
        checkpointer_->NewestComplete();
    if (!old.ok()) return old.status();
    if (old->has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--restore=false, but --checkpoint_dir ", checkpointer_->root(),
          " holds checkpoints of an earlier run (newest ", **old,
          "); give this run its own --checkpoint_dir, or remove them"));
    }
  }
  std::vector<std::string> rejected;
  absl::StatusOr<ValidCheckpoint> latest =
      options_.restore ? checkpointer_->Latest(&rejected)
                       : absl::NotFoundError("--restore is off");
  for (const std::string& why : rejected) {
    std::printf("checkpoint rejected: %s\n", why.c_str());
  }
  if (latest.ok()) {
    if (latest->manifest.next_step_in_epoch() != 0 &&
        latest->manifest.epoch() <= job_.schedule().epochs()) {
      return absl::UnimplementedError(absl::StrCat(
          latest->path, " was taken inside epoch ", latest->manifest.epoch(),
          "; only checkpoints at epoch boundaries can be resumed"));
    }
    if (absl::Status s = checkpointer_->Restore(*latest); !s.ok()) return s;
    const std::string line = absl::StrFormat(
        "resuming from %s: epoch %d, step %lld", latest->path,
        latest->manifest.epoch(), latest->manifest.global_step());
    LOG(INFO) << line;
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    absl::MutexLock lock(&status_mu_);
    status_.set_last_checkpoint(latest->path);
    return PositionOf(latest->manifest);
  }
  if (latest.status().code() != absl::StatusCode::kNotFound) {
    return latest.status();
  }
  JobPosition start;
  absl::StatusOr<std::string> first = checkpointer_->Save(start);
  if (!first.ok()) return first.status();
  absl::MutexLock lock(&status_mu_);
  status_.set_last_checkpoint(*first);
  return start;
}

std::vector<std::string> TrainingJob::FailedServers() {
  std::vector<std::string> failed;
  for (size_t k = 0; k < ps_.size(); ++k) {
    HealthResponse health;
    absl::Status s = ps_[k]->Health(&health, kHealthCheckTimeoutS);
    if (!s.ok()) {
      failed.push_back(absl::StrCat("ps ", k, " (", ps_[k]->address(),
                                    ") does not answer: ", s.message()));
    } else if (k < expected_shards_.size() &&
               health.num_shards() < expected_shards_[k]) {
      failed.push_back(absl::StrCat(
          "ps ", k, " (", ps_[k]->address(), ") holds ", health.num_shards(),
          " of its ", expected_shards_[k], " shards (it restarted)"));
    }
  }
  return failed;
}

absl::StatusOr<JobPosition> TrainingJob::RecoverFromPsFailure(
    const absl::Status& error) {
  if (checkpointer_ == nullptr) return error;
  std::vector<std::string> failed = FailedServers();
  if (failed.empty()) return error;
  const absl::Time start = absl::Now();
  {
    absl::MutexLock lock(&heartbeat_mu_);
    recovering_ = true;
  }
  std::printf("%s; training paused (the epoch failed with: %s)\n",
              absl::StrJoin(failed, "; ").c_str(),
              std::string(error.message()).c_str());
  std::fflush(stdout);
  // A heartbeat may have aborted the steps after the error was taken.
  coordinator_->Join().IgnoreError();
  const absl::Time deadline = absl::Now() + options_.ps_recovery_timeout;
  for (size_t k = 0; k < ps_.size(); ++k) {
    absl::Status s = RetryUntil(deadline, [&] {
      HealthResponse h;
      return ps_[k]->Health(&h, kHealthCheckTimeoutS);
    });
    if (!s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("parameter server ", k, " (", ps_[k]->address(),
                       ") did not come back within ",
                       absl::FormatDuration(options_.ps_recovery_timeout), ": ",
                       s.message()));
    }
  }
  if (absl::Status s = CreateVariables(); !s.ok()) return s;
  std::vector<std::string> rejected;
  absl::StatusOr<ValidCheckpoint> latest = checkpointer_->Latest(&rejected);
  for (const std::string& why : rejected) {
    std::printf("checkpoint rejected: %s\n", why.c_str());
  }
  if (!latest.ok()) return latest.status();
  if (absl::Status s = checkpointer_->Restore(*latest); !s.ok()) return s;
  coordinator_->Join().IgnoreError();
  {
    absl::MutexLock lock(&heartbeat_mu_);
    recovering_ = false;
  }
  const JobPosition position = PositionOf(latest->manifest);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const std::string line = absl::StrFormat(
      "recovered in %.2f s: restored %s on every parameter server; resuming "
      "epoch %d at step %lld",
      seconds, latest->path, position.epoch, position.global_step);
  LOG(INFO) << line;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  absl::MutexLock lock(&status_mu_);
  status_.set_ps_recoveries(status_.ps_recoveries() + 1);
  return position;
}

void TrainingJob::HeartbeatLoop() {
  while (true) {
    {
      absl::MutexLock lock(&heartbeat_mu_);
      auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(heartbeat_mu_) {
        return stop_heartbeat_;
      };
      if (heartbeat_mu_.AwaitWithTimeout(absl::Condition(&stopped),
                                         options_.heartbeat_interval)) {
        return;
      }
      if (recovering_) continue;
    }
    std::vector<std::string> failed = FailedServers();
    if (failed.empty()) continue;
    absl::MutexLock lock(&heartbeat_mu_);
    if (recovering_ || stop_heartbeat_) continue;
    LOG(WARNING) << "heartbeat: " << absl::StrJoin(failed, "; ");
    // Stops the queued steps now rather than one failed step at a time.
    coordinator_->Abort(absl::UnavailableError(
        absl::StrCat("heartbeat: ", absl::StrJoin(failed, "; "))));
  }
}

absl::Status TrainingJob::CheckEpochCoverage(const EpochResult& result,
                                             int64_t train_examples) const {
  // A one-pass epoch reads each training example exactly once: a step lost
  // or run twice (a failed worker's step re-run) would show here.
  if (job_.schedule().steps_per_epoch() != 0) return absl::OkStatus();
  if (result.examples == train_examples) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "epoch ", result.epoch, " trained on ", result.examples,
      " examples; one pass over the training set is ", train_examples));
}

absl::StatusOr<WorkerConfig> TrainingJob::MakeWorkerConfig(int w, int64_t begin,
                                                           int64_t end) const {
  absl::StatusOr<ModelDef> model = JobModel(job_);
  if (!model.ok()) return model.status();
  WorkerConfig config;
  config.set_worker_index(w);
  *config.mutable_model_def() = *std::move(model);
  *config.mutable_data() = job_.data();
  for (const VariablePlacement& p : Placements(plan_)) {
    *config.add_variables() = p;
  }
  config.set_seed(job_.schedule().seed());
  config.set_train_begin(begin);
  config.set_train_end(end);
  // A prefetched pull could miss the previous global step's update.
  config.set_prefetch_parameters(options_.prefetch_parameters &&
                                 !mode_.lockstep());
  config.set_mode(mode_.ToString());
  *config.mutable_optimizer() = job_.optimizer();
  config.set_num_workers(static_cast<int>(workers_.size()));
  return config;
}

absl::StatusOr<std::pair<int64_t, int64_t>> TrainingJob::ProbeDataSizes() {
  // The workers read the data, the coordinator never does: worker 0,
  // configured with an empty shard, reports the sizes (after the job's
  // caps) that the data plan needs. Its real shard comes with the plan.
  absl::StatusOr<WorkerConfig> config = MakeWorkerConfig(0, 0, 0);
  if (!config.ok()) return config.status();
  ConfigureResponse response;
  if (absl::Status s = workers_[0]->Configure(*config, &response); !s.ok()) {
    return s;
  }
  return std::make_pair(response.train_total(), response.test_examples());
}

absl::Status TrainingJob::ConfigureWorkers(const DataPlan& data) {
  for (size_t w = 0; w < workers_.size(); ++w) {
    absl::StatusOr<WorkerConfig> config = MakeWorkerConfig(
        static_cast<int>(w), data.shards()[w].begin, data.shards()[w].end);
    if (!config.ok()) return config.status();
    ConfigureResponse response;
    if (absl::Status s = workers_[w]->Configure(*config, &response); !s.ok()) {
      return s;
    }
    LOG(INFO) << "worker " << w << " on " << response.device() << ": "
              << response.train_examples() << " training examples ["
              << config->train_begin() << ", " << config->train_end() << ")";
  }
  return absl::OkStatus();
}

StepRequest TrainingJob::MakeRequest(int epoch, const PlannedStep& planned,
                                     const DataPlan& data) {
  StepRequest request;
  request.set_epoch(epoch);
  request.set_step(next_step_++);
  AppendRaw(absl::MakeConstSpan(planned.example_ids),
            request.mutable_example_ids());
  request.set_shard_begin(data.shards()[planned.shard].begin);
  request.set_shard_end(data.shards()[planned.shard].end);
  return request;
}

void TrainingJob::Record(const StepResponse& r, int64_t step,
                         ProgressMeter* meter, EpochResult* result,
                         int64_t* correct) {
  for (int64_t s : r.staleness()) ++result->staleness[s];
  result->late_shards += r.late_shards();
  if (r.examples() == 0) return;  // a mirrored replica without data
  meter->Step(r.examples(), r.loss());
  *correct += r.correct();
  int64_t max_staleness = 0;
  for (int64_t s : r.staleness()) max_staleness = std::max(max_staleness, s);
  if (events_ != nullptr) {
    events_->AddScalar("step/loss", step, r.loss()).IgnoreError();
    if (r.staleness_size() > 0) {
      std::vector<int64_t> counts(max_staleness + 1, 0);
      for (int64_t s : r.staleness()) ++counts[s];
      absl::StatusOr<tensorboard::HistogramProto> h = HistogramOfCounts(counts);
      if (h.ok())
        events_->AddHistogram("step/staleness", step, *h).IgnoreError();
    }
  }
  if (step_log_.is_open()) {
    nlohmann::json line = {{"step", step},
                           {"epoch", result->epoch},
                           {"loss", r.loss()},
                           {"examples", r.examples()},
                           {"correct", r.correct()},
                           {"max_staleness", max_staleness},
                           {"late_shards", r.late_shards()}};
    step_log_ << line.dump() << "\n";
    // No flush per step (a system call on the step path): a failed buffer
    // write shows in the stream's state, and WriteMetrics flushes the file
    // at every epoch's end.
    if (!step_log_.good()) CheckWritten(step_log_, "steps.jsonl");
  }
  absl::MutexLock lock(&status_mu_);
  status_.set_steps_done(status_.steps_done() + 1);
  status_.set_examples_done(status_.examples_done() + r.examples());
  status_.set_last_loss(r.loss());
}

absl::Status TrainingJob::RunEpoch(int epoch, DataPlan* data,
                                   EpochResult* result) {
  return RunPlannedSteps(
      data->NextEpoch(), epoch, *data,
      absl::StrFormat("epoch %d/%d", epoch, job_.schedule().epochs()), result);
}

absl::Status TrainingJob::RunPlannedSteps(std::vector<PlannedStep> steps,
                                          int epoch, const DataPlan& data_plan,
                                          const std::string& label,
                                          EpochResult* result) {
  const DataPlan* data = &data_plan;
  int64_t nonempty = 0;
  for (const PlannedStep& p : steps) nonempty += !p.example_ids.empty();
  ProgressMeter meter(stdout, label, nonempty);
  result->epoch = epoch;
  int64_t correct = 0;
  if (mode_.lockstep()) {
    if (absl::Status s = RunLockstepEpoch(std::move(steps), *data, epoch,
                                          &meter, result, &correct);
        !s.ok()) {
      return s;
    }
  } else {
    std::vector<StepFuture> futures;
    std::vector<int64_t> ids;
    futures.reserve(steps.size());
    for (const PlannedStep& planned : steps) {
      StepRequest request = MakeRequest(epoch, planned, *data);
      ids.push_back(request.step());
      absl::StatusOr<StepFuture> future =
          coordinator_->Schedule(std::move(request), planned.shard);
      if (!future.ok()) return future.status();
      futures.push_back(*std::move(future));
    }
    {
      absl::MutexLock lock(&status_mu_);
      status_.set_epoch(std::min(epoch, job_.schedule().epochs()));
      status_.set_steps_scheduled(next_step_);
    }
    for (size_t i = 0; i < futures.size(); ++i) {
      absl::StatusOr<StepResponse> r = futures[i].Get();
      if (!r.ok()) break;  // Join reports the job's first error
      Record(*r, ids[i], &meter, result, &correct);
    }
    if (absl::Status s = coordinator_->Join(); !s.ok()) return s;
  }
  meter.Finish();
  result->steps = meter.steps();
  result->examples = meter.examples();
  result->train_loss = meter.mean_loss();
  result->train_accuracy =
      meter.examples() > 0 ? double(correct) / meter.examples() : 0;
  result->seconds = absl::ToDoubleSeconds(meter.elapsed());
  result->examples_per_second =
      result->examples / std::max(1e-9, result->seconds);
  return absl::OkStatus();
}

absl::Status TrainingJob::RunLockstepEpoch(std::vector<PlannedStep> steps,
                                           const DataPlan& data, int epoch,
                                           ProgressMeter* meter,
                                           EpochResult* result,
                                           int64_t* correct) {
  const bool mirrored = mode_.kind == TrainingMode::Kind::kMirrored;
  const int n = static_cast<int>(workers_.size());
  struct Scheduled {
    int64_t step;
    StepFuture future;
    bool recorded = false;
  };
  // Steps of earlier rounds still running (backup workers' late steps).
  std::vector<Scheduled> stragglers;
  for (std::vector<PlannedStep>& round :
       GroupIntoGlobalSteps(std::move(steps), n, /*pad_missing=*/mirrored)) {
    const int64_t global_step = next_global_step_++;
    const int size = static_cast<int>(round.size());
    const int required =
        mirrored ? size : std::max(1, size - job_.backup_workers());
    std::vector<Scheduled> scheduled;
    for (const PlannedStep& planned : round) {
      StepRequest request = MakeRequest(epoch, planned, data);
      request.set_sync_step(global_step);
      request.set_sync_required(required);
      const int64_t id = request.step();
      absl::StatusOr<StepFuture> future =
          coordinator_->Schedule(std::move(request), planned.shard);
      if (!future.ok()) return future.status();
      scheduled.push_back({id, *std::move(future)});
    }
    {
      absl::MutexLock lock(&status_mu_);
      status_.set_epoch(std::min(epoch, job_.schedule().epochs()));
      status_.set_steps_scheduled(next_step_);
    }
    // The round is over once `required` steps are: their updates are then
    // applied everywhere, and the next round's pulls see them.
    while (true) {
      int ready = 0;
      bool failed = false;
      for (const Scheduled& s : scheduled) {
        if (!s.future.ready()) continue;
        ++ready;
        failed |= !s.future.Get().ok();
      }
      if (ready >= required || failed) break;
      absl::SleepFor(absl::Microseconds(200));
    }
    std::optional<uint32_t> checksum;
    for (Scheduled& s : scheduled) {
      if (!s.future.ready()) {
        stragglers.push_back(std::move(s));
        continue;
      }
      absl::StatusOr<StepResponse> r = s.future.Get();
      if (!r.ok()) return coordinator_->Join();
      Record(*r, s.step, meter, result, correct);
      if (!mirrored) continue;
      if (checksum.has_value() && *checksum != r->replica_checksum()) {
        coordinator_->Join().IgnoreError();
        return absl::DataLossError(
            absl::StrCat("mirrored replicas differ after global step ",
                         global_step, ": parameter checksums ", *checksum,
                         " and ", r->replica_checksum()));
      }
      checksum = r->replica_checksum();
    }
  }
  if (absl::Status s = coordinator_->Join(); !s.ok()) return s;
  for (Scheduled& s : stragglers) {
    absl::StatusOr<StepResponse> r = s.future.Get();
    if (r.ok()) Record(*r, s.step, meter, result, correct);
  }
  return absl::OkStatus();
}

absl::Status TrainingJob::Evaluate(EpochResult* result) {
  // Every worker evaluates a slice of the test set, in parallel.
  const int n = static_cast<int>(workers_.size());
  std::vector<EvaluateResponse> responses(n);
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      EvaluateRequest request;
      request.set_begin(test_examples_ * w / n);
      request.set_end(test_examples_ * (w + 1) / n);
      statuses[w] = workers_[w]->Evaluate(request, &responses[w]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < n; ++w) {
    if (statuses[w].ok()) continue;
    EvaluateRequest request;
    request.set_begin(test_examples_ * w / n);
    request.set_end(test_examples_ * (w + 1) / n);
    statuses[w] = EvaluateElsewhere(w, request, statuses[w], &responses[w]);
  }
  int64_t examples = 0, correct = 0;
  double loss = 0;
  std::vector<float> probabilities, labels;
  for (int w = 0; w < n; ++w) {
    if (!statuses[w].ok()) return statuses[w];
    examples += responses[w].examples();
    correct += responses[w].correct();
    loss += responses[w].loss_sum();
    probabilities.insert(probabilities.end(),
                         responses[w].probabilities().begin(),
                         responses[w].probabilities().end());
    labels.insert(labels.end(), responses[w].labels().begin(),
                  responses[w].labels().end());
  }
  result->test_accuracy = examples > 0 ? double(correct) / examples : 0;
  result->test_loss = examples > 0 ? loss / examples : 0;
  if (!probabilities.empty()) {
    // Exact over the whole test set: every prediction, sorted once.
    absl::StatusOr<double> auc = RocAuc(probabilities, labels);
    if (!auc.ok()) return auc.status();
    absl::StatusOr<double> log_loss = LogLoss(probabilities, labels);
    if (!log_loss.ok()) return log_loss.status();
    result->auc = *auc;
    result->log_loss = *log_loss;
  }
  absl::MutexLock lock(&status_mu_);
  status_.set_last_test_accuracy(static_cast<float>(result->test_accuracy));
  return absl::OkStatus();
}

absl::Status TrainingJob::EvaluateElsewhere(int owner,
                                            const EvaluateRequest& request,
                                            absl::Status failure,
                                            EvaluateResponse* response) {
  const int n = static_cast<int>(workers_.size());
  if (workers_[owner]->Probe() == WorkerHealth::kReady) return failure;
  LOG(WARNING) << "worker " << owner << " failed evaluating test examples ["
               << request.begin() << ", " << request.end() << ") (" << failure
               << "); trying the other workers";
  const absl::Time deadline =
      absl::Now() + options_.coordinator.worker_recovery_timeout;
  Backoff backoff;
  while (true) {
    for (int i = 0; i < n; ++i) {
      const int w = (owner + 1 + i) % n;  // the others first
      RemoteWorker* worker = workers_[w];
      const WorkerHealth health = worker->Probe();
      if (health == WorkerHealth::kDown) continue;
      if (health == WorkerHealth::kLostState && !worker->Restore().ok()) {
        continue;
      }
      response->Clear();
      absl::Status s = worker->Evaluate(request, response);
      if (s.ok()) {
        LOG(INFO) << "test examples [" << request.begin() << ", "
                  << request.end() << ") evaluated by worker " << w;
        return s;
      }
      if (worker->Probe() == WorkerHealth::kReady) return s;
      failure = s;
    }
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "no worker could evaluate test examples [", request.begin(), ", ",
          request.end(), ") within ",
          absl::FormatDuration(options_.coordinator.worker_recovery_timeout),
          ": ", failure.message()));
    }
    absl::SleepFor(backoff.Next());
  }
}

void TrainingJob::WriteMetrics(const EpochResult& r) {
  if (events_ != nullptr) {
    events_->AddScalar("epoch/train_loss", r.epoch, r.train_loss).IgnoreError();
    events_->AddScalar("epoch/train_accuracy", r.epoch, r.train_accuracy)
        .IgnoreError();
    events_->AddScalar("epoch/test_loss", r.epoch, r.test_loss).IgnoreError();
    events_->AddScalar("epoch/test_accuracy", r.epoch, r.test_accuracy)
        .IgnoreError();
    if (r.auc >= 0) {
      events_->AddScalar("epoch/auc", r.epoch, r.auc).IgnoreError();
      events_->AddScalar("epoch/log_loss", r.epoch, r.log_loss).IgnoreError();
    }
    events_
        ->AddScalar("epoch/examples_per_second", r.epoch, r.examples_per_second)
        .IgnoreError();
    if (!r.staleness.empty()) {
      std::vector<int64_t> counts(r.staleness.rbegin()->first + 1, 0);
      for (const auto& [staleness, count] : r.staleness) {
        counts[staleness] = count;
      }
      absl::StatusOr<tensorboard::HistogramProto> h = HistogramOfCounts(counts);
      if (h.ok()) {
        events_->AddHistogram("epoch/staleness", r.epoch, *h).IgnoreError();
      }
    }
    events_->Flush().IgnoreError();
  }
  if (options_.run_dir.empty()) return;
  nlohmann::json line = {{"epoch", r.epoch},
                         {"steps", r.steps},
                         {"examples", r.examples},
                         {"train_loss", r.train_loss},
                         {"train_accuracy", r.train_accuracy},
                         {"test_loss", r.test_loss},
                         {"test_accuracy", r.test_accuracy},
                         {"seconds", r.seconds},
                         {"examples_per_second", r.examples_per_second},
                         {"mode", mode_.ToString()},
                         {"late_shards", r.late_shards}};
  if (r.auc >= 0) {
    line["auc"] = r.auc;
    line["log_loss"] = r.log_loss;
    if (best_auc_ >= 0) line["best_auc"] = best_auc_;
  }
  if (!r.staleness.empty()) {
    nlohmann::json histogram = nlohmann::json::object();
    int64_t pushes = 0, sum = 0, max = 0;
    for (const auto& [staleness, count] : r.staleness) {
      histogram[std::to_string(staleness)] = count;
      pushes += count;
      sum += staleness * count;
      max = std::max(max, staleness);
    }
    line["staleness"] = {{"histogram", histogram},
                         {"mean", double(sum) / std::max<int64_t>(1, pushes)},
                         {"max", max}};
  }
  std::ofstream out(options_.run_dir + "/metrics.jsonl", std::ios::app);
  out << line.dump() << "\n";
  CheckWritten(out, "metrics.jsonl");
  if (step_log_.is_open()) CheckWritten(step_log_, "steps.jsonl");
}

void TrainingJob::CheckWritten(std::ostream& out,
                               const std::string& file) const {
  out.flush();
  if (out.good()) return;
  const int error = errno;
  RecordWriteFailure(absl::StrCat("writing ", options_.run_dir, "/", file,
                                  " failed: ", std::strerror(error)));
  out.clear();  // so that the next write is checked on its own
}

void TrainingJob::RecordWriteFailure(const std::string& what) const {
  LOG(ERROR) << what;
  std::printf("error: %s\n", what.c_str());
  std::fflush(stdout);
  absl::MutexLock lock(&failures_mu_);
  write_failures_.push_back(what);
}

void TrainingJob::WriteCharts() const {
  if (options_.run_dir.empty() || results_.empty()) return;
  SvgChart accuracy("Accuracy per epoch", "epoch", "accuracy");
  SvgChart loss("Loss per epoch", "epoch", "loss");
  std::vector<std::pair<double, double>> train_acc, test_acc, train_loss,
      test_loss;
  for (const EpochResult& r : results_) {
    train_acc.emplace_back(r.epoch, r.train_accuracy);
    test_acc.emplace_back(r.epoch, r.test_accuracy);
    train_loss.emplace_back(r.epoch, r.train_loss);
    test_loss.emplace_back(r.epoch, r.test_loss);
  }
  accuracy.AddSeries("train", std::move(train_acc));
  accuracy.AddSeries("test", std::move(test_acc));
  loss.AddSeries("train", std::move(train_loss));
  loss.AddSeries("test", std::move(test_loss));
  for (const auto& [file, chart] :
       {std::pair<const char*, const SvgChart*>{"accuracy.svg", &accuracy},
        {"loss.svg", &loss}}) {
    std::ofstream out(options_.run_dir + "/" + file);
    out << chart->Render();
    CheckWritten(out, file);
  }
}

void TrainingJob::PrintSummary(absl::Duration wall) const {
  std::printf("\n%-6s %10s %11s %10s %10s %10s %8s\n", "epoch", "train_loss",
              "train_acc", "test_loss", "test_acc", "ex/s", "secs");
  int64_t examples = 0;
  double train_seconds = 0;
  for (const EpochResult& r : results_) {
    std::printf("%-6d %10.4f %11.4f %10.4f %10.4f %10.0f %8.1f\n", r.epoch,
                r.train_loss, r.train_accuracy, r.test_loss, r.test_accuracy,
                r.examples_per_second, r.seconds);
    examples += r.examples;
    train_seconds += r.seconds;
  }
  if (results_.empty()) {
    std::printf("\nno epoch left to train; wall time %.1f s\n",
                absl::ToDoubleSeconds(wall));
    std::fflush(stdout);
    return;
  }
  const EpochResult& last = results_.back();
  std::printf(
      "\nfinal test accuracy %.4f after %zu epochs; %lld examples in %.1f s "
      "of training (%.0f examples/s); wall time %.1f s; %lld steps re-run\n",
      last.test_accuracy, results_.size(), static_cast<long long>(examples),
      train_seconds, examples / std::max(1e-9, train_seconds),
      absl::ToDoubleSeconds(wall),
      static_cast<long long>(coordinator_->steps_rerun()));
  if (last.auc >= 0) {
    std::printf("final test AUC %.4f, best achievable %s, log loss %.4f\n",
                last.auc,
                best_auc_ >= 0 ? absl::StrFormat("%.4f", best_auc_).c_str()
                               : "unknown (no meta.json beside the test file)",
                last.log_loss);
  }
  // What the parameter servers hold by their own accounting (values,
  // optimizer slots, table overhead), as sizing a cluster needs.
  std::string per_server;
  double total = 0;
  for (size_t k = 0; k < ps_.size(); ++k) {
    HealthResponse health;
    if (!ps_[k]->Health(&health, kHealthCheckTimeoutS).ok()) continue;
    total += health.resident_bytes();
    absl::StrAppendFormat(&per_server, "%sps %d %.1f MB",
                          per_server.empty() ? "" : ", ", k,
                          health.resident_bytes() / 1e6);
  }
  if (!per_server.empty()) {
    std::printf("parameter servers hold %.1f MB (%s)\n", total / 1e6,
                per_server.c_str());
  }
  std::fflush(stdout);
}

void TrainingJob::ShutdownCluster() {
  for (RemoteWorker* w : workers_) {
    if (absl::Status s = w->Shutdown("job finished"); !s.ok()) {
      LOG(WARNING) << s;
    }
  }
  for (auto& ps : ps_) {
    if (absl::Status s = ps->Shutdown("job finished"); !s.ok()) {
      LOG(WARNING) << s;
    }
  }
}

absl::Status TrainingJob::Run() {
  const absl::Time start = absl::Now();
  absl::Status status = [&]() -> absl::Status {
    if (!mode_error_.ok()) return mode_error_;
    if (!options_.run_dir.empty()) {
      step_log_.open(options_.run_dir + "/steps.jsonl", std::ios::app);
      absl::StatusOr<std::unique_ptr<EventFileWriter>> events =
          EventFileWriter::Create(options_.run_dir + "/tensorboard");
      if (!events.ok()) return events.status();
      events_ = *std::move(events);
    }
    LOG(INFO) << "mode " << mode_.ToString();
    if (absl::Status s = WaitForCluster(); !s.ok()) return s;
    absl::StatusOr<std::pair<int64_t, int64_t>> sizes = ProbeDataSizes();
    if (!sizes.ok()) return sizes.status();
    const int64_t train = sizes->first;
    test_examples_ = sizes->second;
    if (job_.data().format() == "criteo") {
      best_auc_ = ReadBestAuc(job_.data().test_path());
    }
    // In sync and mirrored modes batch_size and steps_per_epoch count
    // global steps, each one batch per worker.
    const int n = static_cast<int>(workers_.size());
    const int64_t per_worker_batch = mode_.lockstep()
                                         ? job_.schedule().batch_size() / n
                                         : job_.schedule().batch_size();
    const int64_t steps = mode_.lockstep()
                              ? job_.schedule().steps_per_epoch() * n
                              : job_.schedule().steps_per_epoch();
    auto plan_data = [&](int epoch) -> absl::StatusOr<DataPlan> {
      absl::StatusOr<DataPlan> plan = DataPlan::Create(
          train, n, per_worker_batch, steps, job_.schedule().seed());
      // Plans are reproducible: epoch e's steps follow from the e-1 before.
      if (plan.ok()) {
        for (int e = 1; e < epoch; ++e) plan->NextEpoch();
      }
      return plan;
    };
    absl::StatusOr<DataPlan> data = plan_data(1);
    if (!data.ok()) return data.status();
    if (absl::Status s = CreateVariables(); !s.ok()) return s;
    if (absl::Status s = ConfigureWorkers(*data); !s.ok()) return s;
    if (options_.evaluate_only) return EvaluateCheckpoint();
    JobPosition position;
    if (checkpointer_ != nullptr) {
      absl::StatusOr<JobPosition> resumed = StartFromCheckpoint();
      if (!resumed.ok()) return resumed.status();
      position = *resumed;
      data = plan_data(position.epoch);
      if (!data.ok()) return data.status();
      next_step_ = position.global_step;
      next_global_step_ = position.next_sync_step;
      if (options_.heartbeat_interval > absl::ZeroDuration()) {
        heartbeat_ = std::thread([this] { HeartbeatLoop(); });
      }
    }
    LOG(INFO) << "training on " << train << " examples, "
              << data->steps_per_epoch() << " steps per epoch, batch "
              << job_.schedule().batch_size() << ", testing on "
              << test_examples_;
    const int epochs = job_.schedule().epochs();
    int epoch = position.epoch;
    {
      absl::MutexLock lock(&status_mu_);
      status_.set_state("training");
    }
    while (epoch <= epochs && !control_.stop_requested()) {
      EpochResult result;
      absl::Status s = RunEpoch(epoch, &*data, &result);
      if (s.ok()) s = Evaluate(&result);
      if (!s.ok() && control_.stop_requested()) break;
      if (!s.ok()) {
        absl::StatusOr<JobPosition> resumed = RecoverFromPsFailure(s);
        if (!resumed.ok()) return resumed.status();
        epoch = resumed->epoch;
        next_step_ = resumed->global_step;
        data = plan_data(epoch);
        if (!data.ok()) return data.status();
        continue;
      }
      if (absl::Status check = CheckEpochCoverage(result, train); !check.ok()) {
        return check;
      }
      std::printf(
          "epoch %d/%d: train loss %.4f, train accuracy %.4f, test loss "
          "%.4f, test accuracy %.4f, %.0f examples/s\n",
          epoch, epochs, result.train_loss, result.train_accuracy,
          result.test_loss, result.test_accuracy, result.examples_per_second);
      if (result.auc >= 0) {
        std::printf(
            "epoch %d/%d: test AUC %.4f (best achievable %s), test "
            "log loss %.4f\n",
            epoch, epochs, result.auc,
            best_auc_ >= 0 ? absl::StrFormat("%.4f", best_auc_).c_str()
                           : "unknown",
            result.log_loss);
      }
      std::fflush(stdout);
      // The epoch's record is written once its checkpoint is safe: an epoch
      // trained again after a server lost its shards gets one line.
      if ((checkpointer_ != nullptr &&
           (epoch % std::max(1, options_.checkpoint_every_epochs) == 0 ||
            epoch == epochs)) ||
          control_.checkpoint_wanted()) {
        JobPosition next;
        next.global_step = next_step_;
        next.epoch = epoch + 1;
        next.next_sync_step = next_global_step_;
        absl::StatusOr<std::string> saved = SaveCheckpoint(next);
        if (!saved.ok() && !FailedServers().empty()) {
          // A server lost its shards (it restarted): this epoch's model is
          // gone with them, so recover as from a failed epoch and train it
          // again from the last checkpoint.
          absl::StatusOr<JobPosition> resumed =
              RecoverFromPsFailure(saved.status());
          if (!resumed.ok()) return resumed.status();
          epoch = resumed->epoch;
          next_step_ = resumed->global_step;
          data = plan_data(epoch);
          if (!data.ok()) return data.status();
          continue;
        }
        if (!saved.ok()) {
          // Training goes on, but the job will not end as if nothing were
          // lost.
          RecordWriteFailure(
              absl::StrCat("checkpoint after epoch ", epoch,
                           " failed: ", saved.status().message()));
        }
      }
      results_.push_back(result);
      WriteMetrics(result);
      WriteCharts();
      ++epoch;
    }
    if (!control_.stop_requested()) {
      if (absl::Status s = ServeCommands(&*data, epoch); !s.ok()) return s;
    }
    if (control_.stop_requested()) {
      std::printf("stopped by the operator (%s) after %lld steps\n",
                  control_.stop_reason().c_str(),
                  static_cast<long long>(coordinator_->steps_done()));
      std::fflush(stdout);
    }
    return absl::OkStatus();
  }();
  bool lost_output = false;
  if (status.ok()) {
    absl::MutexLock lock(&failures_mu_);
    if (!write_failures_.empty()) {
      lost_output = true;
      status = absl::DataLossError(absl::StrCat(
          write_failures_.size(),
          " writes of metrics or checkpoints failed, so the run's output is "
          "incomplete; the first: ",
          write_failures_.front()));
    }
  }
  {
    absl::MutexLock lock(&status_mu_);
    status_.set_state(status.ok() ? "done"
                                  : absl::StrCat("failed: ", status.message()));
  }
  control_.End(status);
  // Training itself succeeded when only writes failed: its figures still
  // go to the terminal, before the error.
  if (status.ok() || lost_output) PrintSummary(absl::Now() - start);
  if (options_.shutdown_cluster) ShutdownCluster();
  return status;
}

}  // namespace tessera
