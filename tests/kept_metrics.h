#ifndef TESSERA_TESTS_KEPT_METRICS_H_
#define TESSERA_TESTS_KEPT_METRICS_H_

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/kept_key.h"
#include "tests/shell_command.h"

namespace tessera {

// Where the metrics of `job` are kept: in the temporary folder, under a
// name made of the job, the test executable and the binaries that train
// it (tests/kept_key.h), so that a rebuild of any of them trains it again.
inline std::filesystem::path KeptMetricsPath(const std::string& job) {
  std::vector<std::filesystem::path> binaries;
  for (const char* binary :
       {"/worker/tessera_worker", "/coordinator/tessera_coordinator",
        "/ps_server/tessera_ps", "/deploy/local/tessera_local"}) {
    binaries.push_back(BuildDir() + binary);
  }
  return std::filesystem::path(::testing::TempDir()) /
         (KeptKey("tessera_kept_metrics_", job, binaries) + ".jsonl");
}

// The `lines` metrics lines kept at `kept`, or none when the file is
// missing, holds another count or a line that does not parse (a kept file
// is written whole, so that means a foreign or damaged one: it is trained
// again, and the log says why).
inline std::vector<nlohmann::json> ReadKeptMetrics(
    const std::filesystem::path& kept, size_t lines) {
  std::vector<nlohmann::json> metrics;
  std::ifstream in(kept);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
    if (m.is_discarded()) {
      std::printf("[kept] %s: line %zu does not parse; training again\n",
                  kept.c_str(), metrics.size() + 1);
      return {};
    }
    metrics.push_back(std::move(m));
  }
  if (!metrics.empty() && metrics.size() != lines) {
    std::printf("[kept] %s: %zu lines, not %zu; training again\n", kept.c_str(),
                metrics.size(), lines);
    return {};
  }
  return metrics;
}

// The metrics lines (metrics.jsonl) of an undisturbed run that several
// test cases compare with, trained once per build. CTest runs each case
// in a process of its own and CI repeats the fault label, so a baseline
// kept in a process's memory was trained again by every case and every
// pass. `train` runs the job (`job` must name everything that decides
// the run besides the binaries: mode, flags, data); its lines are kept at
// KeptMetricsPath(job). Only a complete run (`lines` lines) of a case
// that has not failed is kept. It
// is written to a file of this process's and renamed into place, so a
// case never reads part of one; two processes that train it at once
// each rename a whole, equal run, and the later one replaces the other.
inline std::vector<nlohmann::json> KeptMetrics(
    const std::string& job, size_t lines,
    const std::function<std::vector<nlohmann::json>()>& train) {
  namespace fs = std::filesystem;
  const fs::path kept = KeptMetricsPath(job);
  std::vector<nlohmann::json> metrics = ReadKeptMetrics(kept, lines);
  if (metrics.size() == lines) return metrics;
  metrics = train();
  // A run that failed the case (`train`'s checks) is not kept, even whole.
  if (metrics.size() != lines || ::testing::Test::HasFailure()) {
    return metrics;
  }
  const fs::path part = absl::StrCat(kept.string(), ".", getpid());
  bool written = false;
  {
    std::ofstream out(part);
    for (const nlohmann::json& m : metrics) out << m.dump() << "\n";
    out.close();
    written = out.good();
  }
  std::error_code error;
  if (written) fs::rename(part, kept, error);
  if (!written || error) fs::remove(part, error);
  return metrics;
}

}  // namespace tessera

#endif  // TESSERA_TESTS_KEPT_METRICS_H_
