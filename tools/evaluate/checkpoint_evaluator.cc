#include "tools/evaluate/checkpoint_evaluator.h"

#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/io/line_log.h"
#include "common/job_file.h"
#include "tools/evaluate/model_evaluation.h"
#include "tools/export/trained_model.h"

namespace tessera {
namespace {

std::string MetricOrNull(double v) {
  return v < 0 ? "null" : absl::StrFormat("%.6f", v);
}

// What the evaluator waits for, in the words of someone checking the path.
std::string WaitingLine(const std::string& root, int64_t last) {
  std::error_code error;
  const std::string what = last < 0 ? "a checkpoint"
                                    : absl::StrCat("a checkpoint newer than ",
                                                   CheckpointDirName(last));
  std::string line =
      absl::StrCat("evaluator: waiting for ", what, " in ", root,
                   " (a folder ckpt-<step> holding a ", kCheckpointManifestName,
                   " file, which the training job writes)");
  if (!std::filesystem::exists(root, error)) {
    absl::StrAppend(&line, "; ", root, " does not exist yet");
  }
  return line;
}

}  // namespace

CheckpointEvaluator::CheckpointEvaluator(EvaluatorOptions options,
                                         Backend* backend)
    : options_(std::move(options)), backend_(backend) {}

absl::StatusOr<bool> CheckpointEvaluator::EvaluateOne(
    const std::string& path, int64_t step, bool* final_checkpoint,
    const std::function<void(const std::string&)>& report) {
  const std::string name = CheckpointDirName(step);
  absl::StatusOr<TrainedModel> model = LoadTrainedModel(path);
  if (!model.ok()) {
    std::error_code error;
    if (!std::filesystem::exists(path + "/" + kCheckpointManifestName, error)) {
      report(absl::StrCat("evaluator: ", name,
                          " was deleted (checkpoint rotation) while it was "
                          "read; skipped"));
    } else {
      report(absl::StrCat("evaluator: ", name,
                          " skipped: ", model.status().message()));
    }
    return false;
  }
  if (examples_ == nullptr) {
    DataConfig data = model->job.data();
    if (!options_.data_dir.empty()) SetDataDir(options_.data_dir, &data);
    absl::StatusOr<int64_t> n = CountExamples(data, /*train=*/false);
    if (!n.ok()) return n.status();
    int64_t count = *n;
    if (options_.max_examples >= 0)
      count = std::min(count, options_.max_examples);
    absl::StatusOr<std::unique_ptr<ExampleSet>> set =
        LoadExamples(data, model->model, /*train=*/false, 0, count);
    if (!set.ok()) return set.status();
    examples_ = *std::move(set);
  }
  absl::StatusOr<ModelMetrics> m =
      EvaluateModel(*model, *examples_, options_.batch, backend_);
  if (!m.ok()) return m.status();
  *final_checkpoint = model->epoch > model->job.schedule().epochs();

  // The manifest's epoch is the next one to train: this model is the one
  // after epoch - 1, the epoch training's metrics.jsonl line names.
  const int epochs_done = model->epoch - 1;
  const std::string line = absl::StrFormat(
      "{\"step\":%d,\"after_epoch\":%d,\"checkpoint\":\"%s\",\"examples\":%d,"
      "\"loss\":%.6f,\"accuracy\":%.6f,\"auc\":%s,\"log_loss\":%s,"
      "\"seconds\":%.3f,\"unix_time\":%.3f}",
      step, epochs_done, name, m->examples, m->loss, m->accuracy,
      MetricOrNull(m->auc), MetricOrNull(m->log_loss), m->seconds,
      absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  if (absl::Status s = AppendWholeLine(options_.run_dir + "/eval.jsonl", line);
      !s.ok()) {
    return s;
  }
  if (events_ == nullptr) {
    absl::StatusOr<std::unique_ptr<EventFileWriter>> w =
        EventFileWriter::Create(options_.run_dir + "/tensorboard/eval");
    if (!w.ok()) return w.status();
    events_ = *std::move(w);
  }
  std::vector<std::pair<const char*, double>> scalars = {
      {"eval/loss", m->loss}, {"eval/accuracy", m->accuracy}};
  if (m->auc >= 0) scalars.push_back({"eval/auc", m->auc});
  if (m->log_loss >= 0) scalars.push_back({"eval/log_loss", m->log_loss});
  for (const auto& [tag, value] : scalars) {
    if (absl::Status s =
            events_->AddScalar(tag, step, static_cast<float>(value));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = events_->Flush(); !s.ok()) return s;
  ++evaluated_;
  std::string text =
      absl::StrFormat("evaluator: %s (after epoch %d): loss %.4f accuracy %.4f",
                      name, epochs_done, m->loss, m->accuracy);
  if (m->auc >= 0) absl::StrAppendFormat(&text, " auc %.4f", m->auc);
  if (m->log_loss >= 0) {
    absl::StrAppendFormat(&text, " log_loss %.4f", m->log_loss);
  }
  absl::StrAppendFormat(&text, " (%d examples, %.1f s)", m->examples,
                        m->seconds);
  report(text);
  return true;
}

absl::Status CheckpointEvaluator::Run(
    const std::function<bool()>& stop,
    const std::function<void(const std::string&)>& report) {
  const std::string& root = options_.checkpoint_root;
  if (root.empty()) {
    return absl::InvalidArgumentError(
        "no checkpoint folder given (the training job's checkpoint root)");
  }
  std::error_code error;
  // The root itself may not exist yet (the job has not started), but its
  // parent must: nothing would ever write into a folder under a missing one.
  std::filesystem::path folder = std::filesystem::path(root).lexically_normal();
  if (!folder.has_filename()) folder = folder.parent_path();  // "ck/"
  const std::filesystem::path parent = folder.parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, error)) {
    return absl::NotFoundError(absl::StrCat(
        "checkpoint folder ", root, ": its parent folder ", parent.string(),
        " does not exist, so no training job can write checkpoints there "
        "(a mistyped path?)"));
  }
  CheckpointDir dir(root);
  std::filesystem::create_directories(options_.run_dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create ", options_.run_dir, ": ", error.message()));
  }
  int64_t last = -1;
  absl::Time last_new = absl::Now();
  // When the wait for a new checkpoint was last reported; past: not yet.
  absl::Time wait_reported = absl::InfinitePast();
  while (!stop()) {
    absl::StatusOr<std::vector<CheckpointRef>> refs = dir.List();
    const CheckpointRef* newest = nullptr;
    if (refs.ok()) {
      for (const CheckpointRef& ref : *refs) {  // newest first
        if (ref.has_manifest && ref.step > last) {
          newest = &ref;
          break;
        }
      }
    }
    if (newest == nullptr) {
      if (options_.max_idle > absl::ZeroDuration() &&
          absl::Now() - last_new > options_.max_idle) {
        report(absl::StrCat("evaluator: no new checkpoint for ",
                            absl::FormatDuration(options_.max_idle),
                            "; stopping"));
        return absl::OkStatus();
      }
      if (absl::Now() - wait_reported >= options_.wait_report_every) {
        wait_reported = absl::Now();
        report(WaitingLine(root, last));
      }
      absl::SleepFor(options_.poll);
      continue;
    }
    last = newest->step;
    last_new = absl::Now();
    wait_reported = absl::InfinitePast();
    bool final_checkpoint = false;
    absl::StatusOr<bool> done =
        EvaluateOne(newest->path, newest->step, &final_checkpoint, report);
    if (!done.ok()) return done.status();
    if (*done && final_checkpoint) return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace tessera
