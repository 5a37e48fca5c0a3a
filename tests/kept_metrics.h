#ifndef TESSERA_TESTS_KEPT_METRICS_H_
#define TESSERA_TESTS_KEPT_METRICS_H_

#include <unistd.h>

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

// The metrics lines (metrics.jsonl) of an undisturbed run that several
// test cases compare with, trained once per build. CTest runs each case
// in a process of its own and CI repeats the fault label, so a baseline
// kept in a process's memory was trained again by every case and every
// pass. `train` runs the job (`job` must name everything that decides
// the run besides the binaries: mode, flags, data); its lines are kept at
// KeptMetricsPath(job). Only a complete run (`lines` lines) is kept; it
// is written whole (rename), so a case that reads it never sees part of
// one.
inline std::vector<nlohmann::json> KeptMetrics(
    const std::string& job, size_t lines,
    const std::function<std::vector<nlohmann::json>()>& train) {
  namespace fs = std::filesystem;
  const fs::path kept = KeptMetricsPath(job);
  std::vector<nlohmann::json> metrics;
  {
    std::ifstream in(kept);
    for (std::string line; std::getline(in, line);) {
      metrics.push_back(nlohmann::json::parse(line));
    }
  }
  if (metrics.size() == lines) return metrics;
  metrics = train();
  if (metrics.size() == lines) {
    const fs::path part = absl::StrCat(kept.string(), ".", getpid());
    {
      std::ofstream out(part);
      for (const nlohmann::json& m : metrics) out << m.dump() << "\n";
    }
    std::error_code error;
    fs::rename(part, kept, error);
  }
  return metrics;
}

}  // namespace tessera

#endif  // TESSERA_TESTS_KEPT_METRICS_H_
