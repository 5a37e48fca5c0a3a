#include "ps_server/row_memory_budget.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tessera {

namespace {

int64_t TierMemoryFor(int64_t limit) {
  return std::clamp<int64_t>(limit / 16, int64_t{1} << 20, int64_t{64} << 20);
}

}  // namespace

RowMemoryBudget::RowMemoryBudget(int64_t limit_bytes, std::string disk_root)
    : limit_(limit_bytes),
      disk_root_(std::move(disk_root)),
      tier_memory_(TierMemoryFor(limit_bytes)),
      disk_memory_(NewRowDiskMemory(tier_memory_)),
      used_(tier_memory_) {}

bool RowMemoryBudget::TryCharge(int64_t bytes) {
  int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used + bytes > limit_) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes,
                                        std::memory_order_relaxed));
  return true;
}

std::string RowMemoryBudget::NewTierDirectory(absl::string_view name) {
  return absl::StrCat(disk_root_, "/", absl::StrReplaceAll(name, {{"/", "_"}}),
                      ".", tiers_.fetch_add(1, std::memory_order_relaxed));
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

}  // namespace tessera
