#include "bench/cpu_pin.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tessera {

absl::Status PinTo(const std::string& cpus, const char* flag) {
  if (cpus.empty()) return absl::OkStatus();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (absl::string_view c : absl::StrSplit(cpus, ',')) {
    int cpu = -1;
    if (!absl::SimpleAtoi(c, &cpu) || cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": \"", c, "\" is not a core number"));
    }
    CPU_SET(cpu, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", cpus, ": cannot run there: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

double CoresBusySeconds(const std::string& cpus) {
  if (cpus.empty()) return 0;
  std::vector<std::string> wanted;
  for (absl::string_view c : absl::StrSplit(cpus, ',')) {
    wanted.push_back(absl::StrCat("cpu", c));
  }
  std::ifstream stat("/proc/stat");
  std::string line;
  int64_t busy = 0;
  while (std::getline(stat, line)) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 8 ||
        std::find(wanted.begin(), wanted.end(), f[0]) == wanted.end()) {
      continue;
    }
    // user nice system idle iowait irq softirq steal ...
    for (int k : {1, 2, 3, 6, 7}) {
      int64_t ticks = 0;
      if (absl::SimpleAtoi(f[k], &ticks)) busy += ticks;
    }
  }
  return static_cast<double>(busy) / sysconf(_SC_CLK_TCK);
}

}  // namespace tessera
