#include "coordinator/report/metrics_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/example_digest.h"
#include "common/io/atomic_file.h"
#include "common/io/line_log.h"
#include "common/tensorboard/summary_histogram.h"
#include "coordinator/report/metrics_history.h"
#include "coordinator/report/svg_chart.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

// A rate is a float on the servers: its 7 significant digits, not the
// double's 17 that would print 0.0004 as 0.0004000000189989805.
double RateFigure(double rate) {
  return std::strtod(absl::StrFormat("%.7g", rate).c_str(), nullptr);
}

}  // namespace

MetricsWriter::MetricsWriter(std::string run_dir, std::string mode,
                             std::FILE* out)
    : run_dir_(std::move(run_dir)), mode_(std::move(mode)), out_(out) {}

absl::Status MetricsWriter::Open() {
  if (run_dir_.empty()) return absl::OkStatus();
  // A coordinator killed mid-line left steps.jsonl torn; the next line
  // must not be glued onto it.
  if (absl::StatusOr<int64_t> cut = CutTornLastLine(run_dir_ + "/steps.jsonl");
      !cut.ok()) {
    RecordWriteFailure(std::string(cut.status().message()), "steps.jsonl");
  } else if (*cut > 0) {
    LOG(INFO) << "steps.jsonl: cut a torn last line of " << *cut
              << " bytes, left by a coordinator that died writing it";
  }
  step_log_.open(run_dir_ + "/steps.jsonl", std::ios::app);
  absl::StatusOr<std::unique_ptr<EventFileWriter>> events =
      EventFileWriter::Create(run_dir_ + "/tensorboard");
  if (!events.ok()) return events.status();
  events_ = *std::move(events);
  return absl::OkStatus();
}

void MetricsWriter::RecordStep(int64_t step, int epoch, const StepResponse& r,
                               double learning_rate) {
  int64_t max_staleness = 0;
  for (int64_t s : r.staleness()) max_staleness = std::max(max_staleness, s);
  if (events_ != nullptr) {
    events_->AddScalar("step/loss", step, r.loss()).IgnoreError();
    if (r.staleness_size() > 0) {
      std::vector<int64_t> counts(max_staleness + 1, 0);
      for (int64_t s : r.staleness()) ++counts[s];
      absl::StatusOr<tensorboard::HistogramProto> h = HistogramOfCounts(counts);
      if (h.ok()) {
        events_->AddHistogram("step/staleness", step, *h).IgnoreError();
      }
    }
  }
  if (!step_log_.is_open()) return;
  nlohmann::json line = {{"step", step},
                         {"epoch", epoch},
                         {"loss", r.loss()},
                         {"examples", r.examples()},
                         {"correct", r.correct()},
                         {"max_staleness", max_staleness},
                         {"late_shards", r.late_shards()}};
  if (learning_rate >= 0) line["learning_rate"] = RateFigure(learning_rate);
  step_log_ << line.dump() << "\n";
  // Flushed per step (one write(2), a few microseconds against a step's
  // milliseconds): a killed chief's buffer would lose the steps it
  // recorded last, and with them the count of steps run twice that
  // steps.jsonl shows after a restart.
  step_log_.flush();
  if (!step_log_.good()) CheckWritten(step_log_, "steps.jsonl");
}

void MetricsWriter::WriteEpoch(const EpochResult& r, double best_auc) {
  WriteEpochEvents(r);
  if (run_dir_.empty()) return;
  AppendEpochLine(EpochLine(r, best_auc));
  std::remove((run_dir_ + "/metrics.pending").c_str());
}

void MetricsWriter::WriteEpochEvents(const EpochResult& r) {
  // Extra steps are plotted after the epochs, at the epoch they follow.
  if (events_ != nullptr) {
    const std::string prefix = r.extra_steps.empty() ? "epoch/" : "extra/";
    auto scalar = [&](const char* name, double value) {
      events_->AddScalar(prefix + name, r.epoch, value).IgnoreError();
    };
    scalar("train_loss", r.train_loss);
    scalar("test_loss", r.test_loss);
    if (r.has_accuracy) {
      scalar("train_accuracy", r.train_accuracy);
      scalar("test_accuracy", r.test_accuracy);
    }
    if (r.auc >= 0) {
      scalar("auc", r.auc);
      scalar("log_loss", r.log_loss);
    }
    scalar("examples_per_second", r.examples_per_second);
    if (r.learning_rate >= 0) scalar("learning_rate", r.learning_rate);
    if (r.embedding_learning_rate >= 0) {
      scalar("embedding_learning_rate", r.embedding_learning_rate);
    }
    if (!r.staleness.empty()) {
      std::vector<int64_t> counts(r.staleness.rbegin()->first + 1, 0);
      for (const auto& [staleness, count] : r.staleness) {
        counts[staleness] = count;
      }
      absl::StatusOr<tensorboard::HistogramProto> h = HistogramOfCounts(counts);
      if (h.ok()) {
        events_->AddHistogram(prefix + "staleness", r.epoch, *h).IgnoreError();
      }
    }
    events_->Flush().IgnoreError();
  }
}

std::string MetricsWriter::EpochLine(const EpochResult& r,
                                     double best_auc) const {
  nlohmann::json line = {{"epoch", r.epoch},
                         {"steps", r.steps},
                         {"examples", r.examples},
                         {"train_loss", r.train_loss},
                         {"train_accuracy", r.train_accuracy},
                         {"test_loss", r.test_loss},
                         {"test_accuracy", r.test_accuracy},
                         {"seconds", r.seconds},
                         {"examples_per_second", r.examples_per_second},
                         {"mode", mode_},
                         {"late_shards", r.late_shards}};
  if (!r.extra_steps.empty()) line["extra_steps"] = r.extra_steps;
  // A regression has no accuracy: its losses are its mean squared errors.
  if (!r.has_accuracy) {
    line.erase("train_accuracy");
    line.erase("test_accuracy");
  }
  // Which examples the epoch trained, as one number (exactly once by
  // identity: tests compare it with one pass's).
  if (r.extra_steps.empty() && r.digest_known) {
    line["example_digest"] = DigestText(r.example_digest);
  }
  if (r.bad_records > 0) line["bad_records"] = r.bad_records;
  if (r.steps_rerun > 0) line["steps_rerun"] = r.steps_rerun;
  if (r.learning_rate >= 0) line["learning_rate"] = RateFigure(r.learning_rate);
  if (r.embedding_learning_rate >= 0) {
    line["embedding_learning_rate"] = RateFigure(r.embedding_learning_rate);
  }
  if (r.auc >= 0) {
    line["auc"] = r.auc;
    line["log_loss"] = r.log_loss;
    if (best_auc >= 0) line["best_auc"] = best_auc;
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
  return line.dump();
}

void MetricsWriter::AppendEpochLine(const std::string& line) {
  if (absl::Status s = AppendWholeLine(run_dir_ + "/metrics.jsonl", line);
      !s.ok()) {
    RecordWriteFailure(std::string(s.message()), "metrics.jsonl");
  }
  if (step_log_.is_open()) CheckWritten(step_log_, "steps.jsonl");
  // An epoch's record is work done: on the disk before the next epoch,
  // so that a crash of the machine cannot lose it (a restarted
  // coordinator's summary counts the epochs in metrics.jsonl).
  for (const char* file : {"metrics.jsonl", "steps.jsonl"}) {
    if (file == std::string("steps.jsonl") && !step_log_.is_open()) continue;
    if (absl::Status s = SyncFileAndFolder(absl::StrCat(run_dir_, "/", file));
        !s.ok()) {
      RecordWriteFailure(absl::StrCat("writing ", run_dir_, "/", file,
                                      " failed: ", s.message()),
                         file);
    }
  }
}

absl::Status MetricsWriter::StagePendingEpoch(const EpochResult& r,
                                              double best_auc) {
  if (run_dir_.empty()) return absl::OkStatus();
  return WriteFileAtomically(run_dir_ + "/metrics.pending",
                             EpochLine(r, best_auc) + "\n");
}

int MetricsWriter::RecoverPendingEpoch(int resumed_epoch) {
  if (run_dir_.empty()) return 0;
  const std::string pending_path = run_dir_ + "/metrics.pending";
  const std::vector<std::string> staged = ReadMetricsLines(pending_path);
  if (staged.empty()) return 0;
  const std::string& text = staged.front();
  nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
  int recovered = 0;
  if (!line.is_discarded() && line.is_object() && line.contains("epoch") &&
      line["epoch"].is_number_integer()) {
    const int epoch = line["epoch"].get<int>();
    // Written already when the coordinator died after the line.
    bool written = false;
    for (const std::string& l : ReadMetricsLines(run_dir_ + "/metrics.jsonl")) {
      written |= l == text;
    }
    // Resuming after the epoch: its checkpoint was committed, so the
    // epoch is done and will not be trained again.
    if (epoch < resumed_epoch && !written) {
      AppendEpochLine(text);
      // TensorBoard shows the epoch too, as if its coordinator had lived.
      if (std::optional<EpochResult> r = EpochOfLine(text))
        WriteEpochEvents(*r);
      recovered = epoch;
    }
  }
  std::remove(pending_path.c_str());
  return recovered;
}

void MetricsWriter::WriteCharts(const std::vector<EpochResult>& results) {
  if (run_dir_.empty() || results.empty()) return;
  SvgChart accuracy("Accuracy per epoch", "epoch", "accuracy");
  SvgChart loss("Loss per epoch", "epoch", "loss");
  std::vector<std::pair<double, double>> train_acc, test_acc, train_loss,
      test_loss;
  for (const EpochResult& r : results) {
    if (!r.extra_steps.empty()) continue;  // not an epoch
    train_acc.emplace_back(r.epoch, r.train_accuracy);
    test_acc.emplace_back(r.epoch, r.test_accuracy);
    train_loss.emplace_back(r.epoch, r.train_loss);
    test_loss.emplace_back(r.epoch, r.test_loss);
  }
  if (train_acc.empty()) return;
  accuracy.AddSeries("train", std::move(train_acc));
  accuracy.AddSeries("test", std::move(test_acc));
  loss.AddSeries("train", std::move(train_loss));
  loss.AddSeries("test", std::move(test_loss));
  // A regression's accuracy would be a flat line at 0: no chart of it.
  std::vector<std::pair<const char*, const SvgChart*>> charts = {
      {"loss.svg", &loss}};
  if (results.front().has_accuracy)
    charts.push_back({"accuracy.svg", &accuracy});
  for (const auto& [file, chart] : charts) {
    std::ofstream out(run_dir_ + "/" + file);
    out << chart->Render();
    CheckWritten(out, file);
  }
}

void MetricsWriter::CheckWritten(std::ostream& out, const std::string& file) {
  out.flush();
  if (out.good()) return;
  const int error = errno;
  RecordWriteFailure(absl::StrCat("writing ", run_dir_, "/", file,
                                  " failed: ", std::strerror(error)),
                     file);
  out.clear();  // so that the next write is checked on its own
}

void MetricsWriter::RecordWriteFailure(const std::string& what,
                                       const std::string& file) {
  {
    absl::MutexLock lock(&mu_);
    ++failed_writes_;
    if (!file.empty() && !failed_files_.insert(file).second) return;
    write_failures_.push_back(what);
  }
  LOG(ERROR) << what;
  std::fprintf(
      out_, "error: %s%s\n", what.c_str(),
      file.empty() ? "" : " (later failures of this file counted, not shown)");
  std::fflush(out_);
}

int64_t MetricsWriter::failed_writes() const {
  absl::MutexLock lock(&mu_);
  return failed_writes_;
}

std::vector<std::string> MetricsWriter::write_failures() const {
  absl::MutexLock lock(&mu_);
  return write_failures_;
}

}  // namespace tessera
