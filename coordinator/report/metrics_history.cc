#include "coordinator/report/metrics_history.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "nlohmann/json.hpp"

namespace tessera {

std::vector<std::string> ReadMetricsLines(const std::string& path) {
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{256} << 20;
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return {};
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::uintmax_t bytes = 0;
  for (std::string text; bytes < kMaxBytes && std::getline(in, text);) {
    bytes += text.size() + 1;
    lines.push_back(std::move(text));
  }
  return lines;
}

std::optional<EpochResult> EpochOfLine(const std::string& text) {
  nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
  if (line.is_discarded() || !line.is_object() || !line.contains("epoch") ||
      line.contains("extra_steps")) {
    return std::nullopt;
  }
  EpochResult r;
  r.epoch = line.value("epoch", 0);
  r.steps = line.value("steps", int64_t{0});
  r.examples = line.value("examples", int64_t{0});
  r.train_loss = line.value("train_loss", 0.0);
  r.train_accuracy = line.value("train_accuracy", 0.0);
  r.test_loss = line.value("test_loss", 0.0);
  r.test_accuracy = line.value("test_accuracy", 0.0);
  r.auc = line.value("auc", -1.0);
  r.log_loss = line.value("log_loss", -1.0);
  r.seconds = line.value("seconds", 0.0);
  r.examples_per_second = line.value("examples_per_second", 0.0);
  r.late_shards = line.value("late_shards", int64_t{0});
  r.bad_records = line.value("bad_records", int64_t{0});
  r.steps_rerun = line.value("steps_rerun", int64_t{0});
  // A regression's line has no accuracy (MetricsWriter::EpochLine).
  r.has_accuracy = line.contains("test_accuracy");
  const nlohmann::json* histogram = nullptr;
  if (line.contains("staleness") && line["staleness"].is_object() &&
      line["staleness"].contains("histogram")) {
    histogram = &line["staleness"]["histogram"];
  }
  if (histogram != nullptr && histogram->is_object()) {
    for (const auto& [staleness, count] : histogram->items()) {
      int64_t s = 0;
      if (absl::SimpleAtoi(staleness, &s) && s >= 0 &&
          count.is_number_integer()) {
        r.staleness[s] = count.get<int64_t>();
      }
    }
  }
  return r;
}

std::vector<EpochResult> ReadEpochHistory(const std::string& path) {
  std::vector<EpochResult> epochs;
  for (const std::string& text : ReadMetricsLines(path)) {
    if (std::optional<EpochResult> r = EpochOfLine(text)) epochs.push_back(*r);
  }
  return epochs;
}

std::vector<EpochResult> EpochsBefore(const std::vector<EpochResult>& lines,
                                      int epoch) {
  std::map<int, EpochResult> last;
  for (const EpochResult& r : lines) {
    if (r.epoch >= 1 && r.epoch < epoch) last[r.epoch] = r;
  }
  std::vector<EpochResult> epochs;
  for (auto& [number, r] : last) epochs.push_back(r);
  return epochs;
}

}  // namespace tessera
