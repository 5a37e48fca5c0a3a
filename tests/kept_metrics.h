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
#include "tests/shell_command.h"

namespace tessera {

// The metrics lines (metrics.jsonl) of an undisturbed run that several
// test cases compare with, trained once per build. CTest runs each case
// in a process of its own and CI repeats the fault label, so a baseline
// kept in a process's memory was trained again by every case and every
// pass. `train` runs the job; its lines are kept in the temporary folder
// under a name made of `job` (which must name everything that decides
// the run: mode, flags, data) and the modification times of the binaries
// that train it, so a rebuild trains it again. Only a complete run
// (`lines` lines) is kept; it is written whole (rename), so a case that
// reads it never sees part of one.
inline std::vector<nlohmann::json> KeptMetrics(
    const std::string& job, size_t lines,
    const std::function<std::vector<nlohmann::json>()>& train) {
  namespace fs = std::filesystem;
  std::string key = job;
  for (const char* binary :
       {"/worker/tessera_worker", "/coordinator/tessera_coordinator",
        "/ps_server/tessera_ps", "/deploy/local/tessera_local"}) {
    std::error_code error;
    const auto mtime = fs::last_write_time(BuildDir() + binary, error);
    absl::StrAppend(&key, ":", mtime.time_since_epoch().count());
  }
  const fs::path kept = fs::path(::testing::TempDir()) /
                        absl::StrCat("tessera_kept_metrics_",
                                     std::hash<std::string>()(key), ".jsonl");
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
