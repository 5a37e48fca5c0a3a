#include "ps_server/row_memory_budget.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

// gperftools' tcmalloc (tessera_ps links it), resolved only where the
// binary links it: weak, so this library needs no tcmalloc of its own.
extern "C" void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));

namespace tessera {

namespace {

int64_t TierMemoryFor(int64_t limit) {
  // Below 4 MiB the memtables (a quarter each, at least 1 MiB) would not
  // fit in it.
  return std::clamp<int64_t>(limit / 16, int64_t{4} << 20, int64_t{64} << 20);
}

}  // namespace

RowMemoryBudget::RowMemoryBudget(int64_t limit_bytes, std::string disk_root,
                                 std::function<int64_t()> resident_bytes)
    : limit_(limit_bytes),
      disk_root_(std::move(disk_root)),
      tier_memory_(TierMemoryFor(limit_bytes)),
      resident_bytes_(std::move(resident_bytes)),
      disk_database_(
          NewRowDiskDatabase(absl::StrCat(disk_root_, "/rows"), tier_memory_)),
      used_(tier_memory_) {}

bool RowMemoryBudget::TryCharge(int64_t bytes) {
  // The process' own memory is what it holds beyond the rows and the
  // tier: a block fits only if the resident memory has room for it too
  // (tables touch a block's pages when granted, so it counts at once).
  // The tier's share it does not use yet is still to come.
  if (resident_bytes_ != nullptr) {
    auto fits = [&] {
      return resident_bytes_() + bytes +
                 std::max<int64_t>(
                     0, tier_memory_ - RowDiskMemoryBytes(*disk_database_)) <=
             limit_;
    };
    // The allocator keeps freed pages resident (tcmalloc always, glibc
    // below its top chunk), so after tables are dropped and rebuilt (a
    // restore) the resident memory stays at the old peak although the
    // process has room. Freed pages go back to the system before a block
    // is refused, and the resident memory is read again: the budget
    // still bounds what the process really holds (counting the
    // allocator's in-use bytes instead would not count its slack).
    if (!fits()) {
      ReleaseFreeMemory();
      if (!fits()) return false;
    }
  }
  int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used + bytes > limit_) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes,
                                        std::memory_order_relaxed));
  return true;
}

void ReleaseFreeMemory() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) {
    MallocExtension_ReleaseFreeMemory();
  } else {
    malloc_trim(0);
  }
}

int64_t ProcessResidentBytes() {
  // The file stays open: a table under a full budget asks for a block
  // every few rows, and opening /proc/self/statm each time (a path walk
  // through /proc/self, then a close) was 3% of the machine in the disk
  // tier's DLRM bench; a pread of the open file reads it afresh. Keyed by
  // pid, as a forked child must read its own, not the parent's.
  static absl::Mutex mu(absl::kConstInit);
  static int fd ABSL_GUARDED_BY(mu) = -1;
  static pid_t owner ABSL_GUARDED_BY(mu) = 0;
  char text[128];
  ssize_t got;
  {
    absl::MutexLock lock(&mu);
    const pid_t pid = getpid();
    if (fd < 0 || owner != pid) {
      if (fd >= 0) close(fd);
      fd = open(absl::StrCat("/proc/", pid, "/statm").c_str(),
                O_RDONLY | O_CLOEXEC);
      owner = pid;
      if (fd < 0) return 0;
    }
    got = pread(fd, text, sizeof(text) - 1, 0);
  }
  if (got <= 0) return 0;
  text[got] = '\0';
  // statm's second field: resident pages.
  long long resident = 0;
  if (std::sscanf(text, "%*s %lld", &resident) != 1) return 0;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

absl::StatusOr<int64_t> ParseByteCount(absl::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text,
                     "\" is not a byte count > 0: a whole number with an "
                     "optional suffix K, M, G or T (e.g. 512M, 2G)"));
  };
  absl::string_view digits = absl::StripAsciiWhitespace(text);
  int shift = 0;
  if (!digits.empty()) {
    switch (absl::ascii_toupper(digits.back())) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
    if (shift > 0) digits.remove_suffix(1);
  }
  int64_t count = 0;
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return absl::ascii_isdigit(c); }) ||
      !absl::SimpleAtoi(digits, &count) || count <= 0 ||
      count > (std::numeric_limits<int64_t>::max() >> shift)) {
    return bad();
  }
  return count << shift;
}

absl::StatusOr<int64_t> ParseRowMemoryLimit(absl::string_view text) {
  absl::StatusOr<int64_t> bytes = ParseByteCount(text);
  if (bytes.ok() && *bytes < RowMemoryBudget::kMinLimitBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is below the least budget, ",
                     RowMemoryBudget::kMinLimitBytes >> 20,
                     "M: the disk tier's memory takes ", TierMemoryFor(0) >> 20,
                     "M of it, and rows need the rest"));
  }
  return bytes;
}

}  // namespace tessera
