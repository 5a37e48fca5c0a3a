#include "coordinator/learning_rates.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {

absl::StatusOr<std::string> ApplyLearningRateScaling(const TrainingMode& mode,
                                                     int num_workers,
                                                     JobConfig* job) {
  const std::string& rule = job->lr_scaling();
  if (rule.empty() || rule == "none") return std::string();
  if (rule != "linear") {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr_scaling: \"", rule, "\" is not a scaling rule (none or linear)"));
  }
  if (!mode.lockstep()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr_scaling: linear scales by the global batch of the lockstep "
        "modes (sync, hybrid:sync, mirrored, hybrid); in mode ",
        mode.ToString(),
        " every update is one worker's batch, so there is nothing to "
        "scale: drop --lr_scaling or set the learning rate itself"));
  }
  if (job->lr_reference_batch() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lr_reference_batch must be >= 0 (0: one worker's "
                     "batch), got ",
                     job->lr_reference_batch()));
  }
  const int64_t workers = std::max(1, num_workers);
  // Lockstep modes split batch_size over the workers: it is the global
  // batch. In sync the update averages the pushes of all workers but the
  // backup ones.
  const int64_t global = job->schedule().batch_size();
  const int64_t per_worker = global / workers;
  const int64_t reference =
      job->lr_reference_batch() > 0 ? job->lr_reference_batch() : per_worker;
  if (reference <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr_scaling: the reference batch is 0 (batch_size ", global, " over ",
        workers, " workers): set lr_reference_batch"));
  }
  int64_t averaged = global;
  if (mode.kind == TrainingMode::Kind::kSync && job->backup_workers() > 0) {
    averaged = per_worker * (workers - job->backup_workers());
  }
  const double factor =
      static_cast<double>(averaged) / static_cast<double>(reference);
  // Which optimizers average a global batch: every one where the tables'
  // rows are aggregated per global step too; only the dense one where
  // they are pushed per worker (hybrid, hybrid:ssp).
  const bool tables_scale =
      mode.kind != TrainingMode::Kind::kHybrid || mode.sync_rows;
  if (!tables_scale && !job->has_embedding_optimizer()) {
    OptimizerConfig tables = job->optimizer();
    *job->mutable_embedding_optimizer() = std::move(tables);
  }
  ScaleLearningRate(factor, job->mutable_optimizer());
  if (tables_scale) {
    if (job->has_embedding_optimizer()) {
      ScaleLearningRate(factor, job->mutable_embedding_optimizer());
    }
    for (auto& [table, optimizer] : *job->mutable_table_optimizers()) {
      ScaleLearningRate(factor, &optimizer);
    }
  }
  return absl::StrFormat(
      "lr_scaling linear: global batch %d / reference batch %d: learning "
      "rates x%g (%s)",
      averaged, reference, factor,
      tables_scale ? "every optimizer"
                   : "the dense optimizer; the tables' rows are pushed per "
                     "worker and keep theirs");
}

absl::StatusOr<JobLearningRates> JobLearningRates::Create(
    const JobConfig& job, const TrainingMode& mode) {
  absl::StatusOr<LearningRate> dense =
      LearningRate::Create(job.optimizer(), "optimizer");
  if (!dense.ok()) return dense.status();
  std::optional<LearningRate> embedding;
  if (job.has_embedding_optimizer()) {
    absl::StatusOr<LearningRate> rate =
        LearningRate::Create(job.embedding_optimizer(), "embedding_optimizer");
    if (!rate.ok()) return rate.status();
    embedding = *rate;
  }
  return JobLearningRates(*dense, embedding, mode);
}

JobLearningRates::Rates JobLearningRates::At(int64_t worker_steps,
                                             int64_t global_steps) const {
  Rates rates;
  const int64_t dense_t = mode_.lockstep() ? global_steps : worker_steps;
  rates.dense = dense_.Rate(std::max<int64_t>(1, dense_t));
  if (embedding_.has_value()) {
    // Replicated tables step with the dense variables; sharded ones as the
    // mode's row pushes do.
    const int64_t table_t =
        mode_.aggregates_steps() || mode_.kind == TrainingMode::Kind::kMirrored
            ? global_steps
            : worker_steps;
    rates.embedding = embedding_->Rate(std::max<int64_t>(1, table_t));
  }
  return rates;
}

bool JobLearningRates::scheduled() const {
  return !dense_.constant() ||
         (embedding_.has_value() && !embedding_->constant());
}

}  // namespace tessera
