// The bytes of rows one parameter server may keep in memory
// (tessera_ps --row_memory_budget), and where the rows beyond it go.
#ifndef TESSERA_PS_SERVER_ROW_MEMORY_BUDGET_H_
#define TESSERA_PS_SERVER_ROW_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ps_server/row_disk_store.h"

namespace tessera {

// A server's budget for rows in memory, shared by all its shards. Fixed
// shards are charged their whole size when made (they cannot spill); a
// growing table charges what it allocates (record blocks and index) and,
// when a new block would not fit, moves its least recently touched rows
// to its disk tier instead (ps_server/hash_table.h). The budget is a
// target, not a hard cap: a stripe of a table with no block yet takes its
// first one regardless, so a table may pass it by at most one block per
// stripe. The disk tiers' shared memory (RocksDB's cache, memtables,
// indexes and filters) takes tier_memory_bytes() of it from the start:
// 1/16 of the limit, within [1 MiB, 64 MiB].
//
// Thread safety: all methods may be called concurrently.
class RowMemoryBudget {
 public:
  // `limit_bytes` > 0. `disk_root` is the folder each spilling table makes
  // its disk tier under; it is created when needed.
  RowMemoryBudget(int64_t limit_bytes, std::string disk_root);
  RowMemoryBudget(const RowMemoryBudget&) = delete;
  RowMemoryBudget& operator=(const RowMemoryBudget&) = delete;

  int64_t limit_bytes() const { return limit_; }
  int64_t used_bytes() const { return used_.load(std::memory_order_relaxed); }
  const std::string& disk_root() const { return disk_root_; }
  int64_t tier_memory_bytes() const { return tier_memory_; }
  // What every disk tier of the server opens with.
  const std::shared_ptr<RowDiskMemory>& disk_memory() const {
    return disk_memory_;
  }

  // Takes `bytes` when they fit under the limit; false (nothing taken)
  // when they do not.
  bool TryCharge(int64_t bytes);
  // Takes (or, negative, gives back) `bytes` whether or not they fit.
  void Charge(int64_t bytes) {
    used_.fetch_add(bytes, std::memory_order_relaxed);
  }

  // A folder under disk_root() for one disk tier of the shard `name`,
  // never handed out twice by this budget: "<root>/<name with / as _>.<n>".
  std::string NewTierDirectory(absl::string_view name);

 private:
  const int64_t limit_;
  const std::string disk_root_;
  const int64_t tier_memory_;
  const std::shared_ptr<RowDiskMemory> disk_memory_;
  std::atomic<int64_t> used_{0};
  std::atomic<int64_t> tiers_{0};
};

// Parses a byte count as flags give it: a whole number with an optional
// suffix K, M, G or T (powers of 1024; "512M", "2G", "1048576").
// InvalidArgument naming `text` for anything else, for 0 or a negative
// number, and for counts that overflow 64 bits.
absl::StatusOr<int64_t> ParseByteCount(absl::string_view text);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_ROW_MEMORY_BUDGET_H_
