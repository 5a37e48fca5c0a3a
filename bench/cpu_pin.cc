#include "bench/cpu_pin.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

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

}  // namespace tessera
