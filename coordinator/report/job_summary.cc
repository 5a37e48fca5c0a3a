#include "coordinator/report/job_summary.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

std::string BestAuc(double best_auc, const char* unknown) {
  return best_auc >= 0 ? absl::StrFormat("%.4f", best_auc) : unknown;
}

std::string RowLabel(const EpochResult& r) {
  if (r.stopped) return absl::StrCat(r.epoch, " (stopped)");
  return r.extra_steps.empty() ? absl::StrCat(r.epoch) : r.extra_steps;
}

}  // namespace

std::string StepCount(int64_t steps, int64_t global_steps, bool lockstep) {
  if (!lockstep) return absl::StrCat(steps, steps == 1 ? " step" : " steps");
  return absl::StrCat(steps, steps == 1 ? " worker step (" : " worker steps (",
                      global_steps,
                      global_steps == 1 ? " global step)" : " global steps)");
}

void PrintEpochResult(std::FILE* out, const EpochResult& r, int epochs,
                      double best_auc) {
  const std::string label =
      r.extra_steps.empty() ? absl::StrFormat("epoch %d/%d", r.epoch, epochs)
                            : r.extra_steps;
  if (r.has_accuracy) {
    std::fprintf(out,
                 "%s: train loss %.4f, train accuracy %.4f, test loss %.4f, "
                 "test accuracy %.4f, %.0f examples/s\n",
                 label.c_str(), r.train_loss, r.train_accuracy, r.test_loss,
                 r.test_accuracy, r.examples_per_second);
  } else {
    std::fprintf(out,
                 "%s: train loss (MSE) %.4f, test loss (MSE) %.4f, %.0f "
                 "examples/s\n",
                 label.c_str(), r.train_loss, r.test_loss,
                 r.examples_per_second);
  }
  if (r.bad_records > 0) {
    std::fprintf(out, "%s: %lld bad records skipped (skip_bad_records)\n",
                 label.c_str(), static_cast<long long>(r.bad_records));
  }
  if (r.auc >= 0) {
    std::fprintf(out,
                 "%s: test AUC %.4f (best achievable %s), test log loss "
                 "%.4f\n",
                 label.c_str(), r.auc, BestAuc(best_auc, "unknown").c_str(),
                 r.log_loss);
  }
  std::fflush(out);
}

namespace {

// What the table's rows add up to, for the lines under it.
struct SummaryTotals {
  int64_t examples = 0;
  int64_t bad_records = 0;
  double train_seconds = 0;
  int epochs = 0;
  const EpochResult* evaluated = nullptr;  // the last row with test metrics
  const EpochResult* stopped = nullptr;
};

SummaryTotals PrintTable(std::FILE* out, const JobSummary& s) {
  // A regression's rows have no accuracy columns: its loss is the MSE.
  const bool acc = s.has_accuracy;
  if (acc) {
    std::fprintf(out, "\n%-13s %10s %11s %10s %10s %10s %8s\n", "epoch",
                 "train_loss", "train_acc", "test_loss", "test_acc", "ex/s",
                 "secs");
  } else {
    std::fprintf(out, "\n%-13s %10s %10s %10s %8s\n", "epoch", "train_mse",
                 "test_mse", "ex/s", "secs");
  }
  SummaryTotals t;
  for (const EpochResult& r : s.results) {
    const std::string test_loss =
        r.stopped ? "-" : absl::StrFormat("%.4f", r.test_loss);
    if (acc) {
      const std::string test_acc =
          r.stopped ? "-" : absl::StrFormat("%.4f", r.test_accuracy);
      std::fprintf(out, "%-13s %10.4f %11.4f %10s %10s %10.0f %8.1f\n",
                   RowLabel(r).c_str(), r.train_loss, r.train_accuracy,
                   test_loss.c_str(), test_acc.c_str(), r.examples_per_second,
                   r.seconds);
    } else {
      std::fprintf(out, "%-13s %10.4f %10s %10.0f %8.1f\n", RowLabel(r).c_str(),
                   r.train_loss, test_loss.c_str(), r.examples_per_second,
                   r.seconds);
    }
    (r.stopped ? t.stopped : t.evaluated) = &r;
    t.examples += r.examples;
    t.train_seconds += r.seconds;
    t.epochs += r.extra_steps.empty() && !r.stopped ? 1 : 0;
    t.bad_records += r.bad_records;
  }
  return t;
}

// The line of the final figure, what it came after, and the throughput.
void PrintFinalLine(std::FILE* out, const JobSummary& s,
                    const SummaryTotals& t) {
  std::string after = t.evaluated == nullptr || t.evaluated->extra_steps.empty()
                          ? absl::StrCat(t.epochs, " epochs")
                          : absl::StrCat(t.epochs, " epochs and extra ",
                                         t.evaluated->extra_steps);
  if (t.stopped != nullptr) {
    absl::StrAppendFormat(&after,
                          " and %lld of the %lld %s of epoch %d (stopped "
                          "by the operator)",
                          static_cast<long long>(t.stopped->steps),
                          static_cast<long long>(t.stopped->planned_steps),
                          s.lockstep ? "worker steps" : "steps",
                          t.stopped->epoch);
  }
  const bool acc = s.has_accuracy;
  const char* figure = acc ? "test accuracy" : "test loss (MSE)";
  const std::string accuracy =
      t.evaluated == nullptr ? absl::StrCat("no ", figure, " yet")
                             : absl::StrFormat("final %s %.4f", figure,
                                               acc ? t.evaluated->test_accuracy
                                                   : t.evaluated->test_loss);
  if (s.resumed_epochs > 0) {
    absl::StrAppendFormat(&after, " (%s before the coordinator restarted)",
                          s.resumed_epochs == 1
                              ? std::string("epoch 1")
                              : absl::StrCat("epochs 1-", s.resumed_epochs));
  }
  std::fprintf(
      out,
      "\n%s after %s; %lld examples in %.1f s of "
      "training (%.0f examples/s); wall time %.1f s%s; %lld %s re-run\n",
      accuracy.c_str(), after.c_str(), static_cast<long long>(t.examples),
      t.train_seconds, t.examples / std::max(1e-9, t.train_seconds),
      absl::ToDoubleSeconds(s.wall),
      s.resumed_epochs > 0 ? " (this coordinator)" : "",
      static_cast<long long>(s.steps_rerun),
      s.lockstep ? "worker steps" : "steps");
}

void PrintServerBytes(std::FILE* out, const JobSummary& s) {
  // Allocated is not used: a growing table reserves room for the rows it
  // expects, which a short job never fills.
  std::string per_server;
  double allocated = 0, used = 0;
  for (size_t k = 0; k < s.server_bytes.size(); ++k) {
    if (s.server_bytes[k] < 0) continue;
    const int64_t in_use = k < s.server_used_bytes.size()
                               ? s.server_used_bytes[k]
                               : s.server_bytes[k];
    allocated += s.server_bytes[k];
    used += in_use;
    absl::StrAppendFormat(&per_server, "%sps %d %.1f of %.1f MB",
                          per_server.empty() ? "" : ", ", k, in_use / 1e6,
                          s.server_bytes[k] / 1e6);
  }
  if (!per_server.empty()) {
    std::fprintf(out,
                 "parameter servers: %.1f MB used by the rows present, of "
                 "%.1f MB allocated (%s)\n",
                 used / 1e6, allocated / 1e6, per_server.c_str());
  }
}

}  // namespace

void PrintSummary(std::FILE* out, const JobSummary& s) {
  if (s.results.empty()) {
    std::fprintf(out, "\nno epoch left to train; wall time %.1f s\n",
                 absl::ToDoubleSeconds(s.wall));
    std::fflush(out);
    return;
  }
  const SummaryTotals totals = PrintTable(out, s);
  PrintFinalLine(out, s, totals);
  const EpochResult& last =
      totals.evaluated != nullptr ? *totals.evaluated : s.results.back();
  if (last.auc >= 0) {
    std::fprintf(
        out, "final test AUC %.4f, best achievable %s, log loss %.4f\n",
        last.auc,
        BestAuc(s.best_auc, "unknown (no meta.json beside the test file)")
            .c_str(),
        last.log_loss);
  }
  if (totals.bad_records > 0) {
    std::fprintf(out, "%lld bad records were skipped (skip_bad_records)\n",
                 static_cast<long long>(totals.bad_records));
  }
  PrintServerBytes(out, s);
  std::fflush(out);
}

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

}  // namespace tessera
