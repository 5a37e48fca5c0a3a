// Fuzzes Slurm's host list and task-count expansions: any input gives a
// bounded result or an error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "common/cluster/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<std::string>> hosts =
      tessera::ExpandHostlist(text);
  if (hosts.ok()) {
    if (hosts->empty() ||
        hosts->size() > static_cast<size_t>(tessera::kMaxExpandedHosts)) {
      std::abort();
    }
    for (const std::string& host : *hosts) {
      if (host.empty()) std::abort();
    }
  }
  absl::StatusOr<std::vector<int>> counts = tessera::ExpandTasksPerNode(text);
  if (counts.ok()) {
    if (counts->empty() ||
        counts->size() > static_cast<size_t>(tessera::kMaxExpandedHosts)) {
      std::abort();
    }
    for (int c : *counts) {
      if (c <= 0) std::abort();
    }
  }
  return 0;
}
