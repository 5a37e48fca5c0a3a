#include "coordinator/job_config.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data_format.h"
#include "common/model/model_graph.h"
#include "common/model/model_presets.h"
#include "common/model/model_support.h"
#include "common/model/table_placement.h"
#include "common/model/table_precision.h"
#include "common/model/variable_optimizer.h"
#include "common/model_spec.h"
#include "common/optimizer/gradient_clipping.h"
#include "common/optimizer/optimizer.h"
#include "common/training_mode.h"

namespace tessera {

namespace {

// The optimizers the job names, and their gradient clipping.
absl::Status CheckOptimizers(const JobConfig& job,
                             const std::vector<VariableDef>& variables) {
  // Moving averages are the model's rule for its statistics, not a way to
  // train weights from gradients.
  if (job.optimizer().has_moving_average() ||
      job.embedding_optimizer().has_moving_average()) {
    return absl::InvalidArgumentError(
        "optimizer: moving_average is not an optimizer a job can choose (it "
        "updates BatchNorm's moving statistics)");
  }
  if (absl::StatusOr<std::unique_ptr<Optimizer>> opt =
          CreateOptimizer(job.optimizer());
      !opt.ok()) {
    return opt.status();
  }
  if (job.has_embedding_optimizer()) {
    if (absl::StatusOr<std::unique_ptr<Optimizer>> opt =
            CreateOptimizer(job.embedding_optimizer());
        !opt.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("embedding_optimizer: ", opt.status().message()));
    }
  }
  if (absl::Status s = CheckTableOptimizers(job, variables); !s.ok()) {
    return s;
  }
  for (const auto& [table, optimizer] : job.table_optimizers()) {
    if (absl::StatusOr<std::unique_ptr<Optimizer>> opt =
            CreateOptimizer(optimizer);
        !opt.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table_optimizers: \"", table, "\": ", opt.status().message()));
    }
  }
  if (absl::Status s = ValidateGradientClip(GradientClipOf(job.optimizer()),
                                            "optimizer.clipping");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ValidateGradientClip(GradientClipOf(job.embedding_optimizer()),
                               "embedding_optimizer.clipping");
      !s.ok()) {
    return s;
  }
  for (const auto& [table, optimizer] : job.table_optimizers()) {
    if (absl::Status s = ValidateGradientClip(
            GradientClipOf(optimizer),
            absl::StrCat("table_optimizers[\"", table, "\"].clipping"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Where the tables go in `mode`, and what that placement allows.
absl::Status CheckPlacement(const JobConfig& job,
                            const std::vector<VariableDef>& variables,
                            const TrainingMode& mode) {
  absl::StatusOr<std::vector<TablePlan>> tables =
      PlaceTables(variables, job, mode);
  if (!tables.ok()) return tables.status();
  if (absl::Status s =
          CheckModeFits(variables, mode, ReplicatedTables(*tables));
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckTablePrecisions(job, variables, ReplicatedTables(*tables));
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckRowWiseOptimizers(job, variables, ReplicatedTables(*tables));
      !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

// The data's format against the model, and the files each format needs.
absl::Status CheckDataSource(const JobConfig& job, const ModelDef& model) {
  if (absl::Status s = CheckDataFits(model, job.data().format()); !s.ok()) {
    return s;
  }
  const bool streamed = IsStreamedFormat(job.data().format());
  if (streamed &&
      (job.data().train_files().empty() || job.data().test_files().empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data format ", job.data().format(),
        " needs train_files and test_files (globs) in the job file's data"));
  }
  if (streamed &&
      (job.data().train_examples() != 0 || job.data().test_examples() != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train_examples and test_examples do not apply to data format ",
        job.data().format(), ": name fewer files instead"));
  }
  const bool criteo =
      DataFormatNamed(job.data().format()) == DataFormat::kCriteo;
  if (criteo &&
      (job.data().train_path().empty() || job.data().test_path().empty())) {
    return absl::InvalidArgumentError(
        "data format criteo needs train_path and test_path (--data_dir with "
        "train.tsv and test.tsv)");
  }
  return absl::OkStatus();
}

// The counts beside the schedule: rows per shard, sync's backup workers.
absl::Status CheckCounts(const JobConfig& job, const TrainingMode& mode) {
  if (job.expected_rows_per_shard() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected_rows_per_shard must be >= 0, got ",
                     job.expected_rows_per_shard()));
  }
  if (job.backup_workers() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backup_workers must be >= 0, got ", job.backup_workers()));
  }
  if (job.backup_workers() > 0 && mode.kind != TrainingMode::Kind::kSync) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backup_workers is for mode sync; mode is ", mode.ToString()));
  }
  return absl::OkStatus();
}

// Epochs, batches and steps, bounded where a typo would exhaust memory.
absl::Status CheckSchedule(const ScheduleConfig& s) {
  if (s.epochs() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("epochs must be >= 1, got ", s.epochs()));
  }
  if (s.batch_size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size must be >= 1, got ", s.batch_size()));
  }
  if (s.steps_per_epoch() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "steps_per_epoch must be >= 0, got ", s.steps_per_epoch()));
  }
  // An epoch's plan holds every example id it visits (8 bytes each): bound
  // it where a typo (an extra zero or three) would exhaust memory instead.
  constexpr int64_t kMaxBatch = int64_t{1} << 20;
  constexpr int64_t kMaxPlannedExamples = int64_t{1} << 28;
  if (s.batch_size() > kMaxBatch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size must be at most ", kMaxBatch, ", got ", s.batch_size()));
  }
  if (s.steps_per_epoch() > kMaxPlannedExamples / s.batch_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps_per_epoch ", s.steps_per_epoch(), " x batch_size ",
                     s.batch_size(), " plans more than ", kMaxPlannedExamples,
                     " examples per epoch"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJobConfig(const JobConfig& job) {
  // Checked whichever partitioner is chosen: a bad value is a mistake even
  // where it is not read.
  if (job.partitioner().max_shards() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partitioner.max_shards (--max_shards) must be >= 0 (0: no limit), "
        "got ",
        job.partitioner().max_shards()));
  }
  absl::StatusOr<ModelDef> model = JobModel(job);
  if (!model.ok()) return model.status();
  absl::StatusOr<ModelGraph> graph =
      BuildModelGraph(*model, job.schedule().seed());
  if (!graph.ok()) return graph.status();
  if (absl::Status s = CheckOptimizers(job, graph->variables); !s.ok()) {
    return s;
  }
  absl::StatusOr<TrainingMode> mode = ParseTrainingMode(job.mode());
  if (!mode.ok()) return mode.status();
  if (absl::Status s = CheckPlacement(job, graph->variables, *mode); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckDataSource(job, *model); !s.ok()) return s;
  if (absl::Status s = CheckCounts(job, *mode); !s.ok()) return s;
  if (absl::Status s = CheckSchedule(job.schedule()); !s.ok()) return s;
  if (job.data().train_examples() < 0 || job.data().test_examples() < 0) {
    return absl::InvalidArgumentError(
        "train_examples and test_examples must be >= 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateJobForWorkers(const JobConfig& job,
                                   const TrainingMode& mode, int num_workers,
                                   bool /*remove_lost_workers*/) {
  if (mode.lockstep() && num_workers > 0 &&
      job.schedule().batch_size() % num_workers != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mode ", mode.ToString(), ": the global batch_size (--batch_size) ",
        job.schedule().batch_size(), " must split evenly over the ",
        num_workers, " workers; make it a multiple of ", num_workers));
  }
  if (job.backup_workers() > 0 && job.backup_workers() >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backup_workers (--backup_workers) is ", job.backup_workers(),
        " but there are only ", num_workers,
        " workers: a step needs at least one worker that is no backup, so "
        "it must be below ",
        num_workers));
  }
  return absl::OkStatus();
}

}  // namespace tessera
