// The bytes of rows one parameter server may keep in memory
// (tessera_ps --row_memory_budget), and where the rows beyond it go.
#ifndef TESSERA_PS_SERVER_ROW_MEMORY_BUDGET_H_
#define TESSERA_PS_SERVER_ROW_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ps_server/row_disk_store.h"

namespace tessera {

// A server's memory budget (tessera_ps --row_memory_budget), shared by
// all its shards, and where the rows beyond it go. It bounds the whole
// server when given the process' resident memory (`resident_bytes`, as
// tessera_ps does), and the rows alone without:
//  - rows: fixed shards are charged their whole size when made (they
//    cannot spill); a growing table charges what it allocates (record
//    blocks and index) and, when a new block would not fit, moves its
//    rows least recently or least often touched to the disk tier instead
//    (ps_server/hash_table.h);
//  - the disk tier: its one RocksDB database's memory (block cache and
//    memtables, RowDiskDatabase) is tier_memory_bytes() of the limit,
//    taken from the start: 1/16 of it, within [4 MiB, 64 MiB];
//  - the rest of the process (code, gRPC's buffers, threads, the
//    allocator's slack): a new block fits only when the resident memory,
//    the block and the part of the tier's share it does not use yet are
//    within the limit too. A table touches a granted block's pages at
//    once, so the resident memory counts it from then on. Before a block
//    is refused, the allocator's free pages go back to the system
//    (ReleaseFreeMemory) and the resident memory is read again, so
//    memory freed by dropped tables does not keep blocking new ones.
// The budget is a target, not a hard cap: a stripe of a table with no
// block yet takes its first one regardless, so a table may pass it by at
// most one block per stripe (blocks under a budget are small enough that
// this is at most 1/32 of the limit a table), and memory the process takes
// after a block was granted (the tier filling its share, a larger request) is
// seen at the next block only.
//
// Thread safety: all methods may be called concurrently.
class RowMemoryBudget {
 public:
  // The least limit that leaves rows room: the tier's memory takes at
  // least 4 MiB of it from the start.
  static constexpr int64_t kMinLimitBytes = int64_t{8} << 20;

  // `limit_bytes` >= kMinLimitBytes (below it, charges mostly fail).
  // `disk_root` is the folder the disk tier's database goes under; it is
  // created when the first table spills. `resident_bytes`, when given, returns
  // the process' resident memory.
  RowMemoryBudget(int64_t limit_bytes, std::string disk_root,
                  std::function<int64_t()> resident_bytes = nullptr);
  RowMemoryBudget(const RowMemoryBudget&) = delete;
  RowMemoryBudget& operator=(const RowMemoryBudget&) = delete;

  int64_t limit_bytes() const { return limit_; }
  // Rows charged and the tier's memory.
  int64_t used_bytes() const { return used_.load(std::memory_order_relaxed); }
  const std::string& disk_root() const { return disk_root_; }
  int64_t tier_memory_bytes() const { return tier_memory_; }
  // Whether charges also look at the process' resident memory (then a
  // granted block should be touched at once so that the next one sees it).
  bool reads_resident_memory() const { return resident_bytes_ != nullptr; }
  // The database every disk tier of the server opens in
  // (disk_root()/rows).
  const std::shared_ptr<RowDiskDatabase>& disk_database() const {
    return disk_database_;
  }

  // Takes `bytes` when they fit under the limit (with the process'
  // resident memory, when known, after returning the allocator's free
  // pages if it was over); false (nothing taken) when they do not.
  bool TryCharge(int64_t bytes);
  // Takes (or, negative, gives back) `bytes` whether or not they fit.
  void Charge(int64_t bytes) {
    used_.fetch_add(bytes, std::memory_order_relaxed);
  }

 private:
  const int64_t limit_;
  const std::string disk_root_;
  const int64_t tier_memory_;
  const std::function<int64_t()> resident_bytes_;
  const std::shared_ptr<RowDiskDatabase> disk_database_;
  std::atomic<int64_t> used_{0};
};

// Returns the allocator's free pages to the system: tcmalloc's where the
// binary links it, else glibc's (malloc_trim).
void ReleaseFreeMemory();

// The resident memory of this process (VmRSS, /proc/self/statm), 0 where
// it cannot be read.
int64_t ProcessResidentBytes();

// Parses a byte count as flags give it: a whole number with an optional
// suffix K, M, G or T (powers of 1024; "512M", "2G", "1048576").
// InvalidArgument naming `text` for anything else, for 0 or a negative
// number, and for counts that overflow 64 bits.
absl::StatusOr<int64_t> ParseByteCount(absl::string_view text);

// ParseByteCount of a budget's limit, InvalidArgument naming `text` and
// the minimum for a count below RowMemoryBudget::kMinLimitBytes.
absl::StatusOr<int64_t> ParseRowMemoryLimit(absl::string_view text);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_ROW_MEMORY_BUDGET_H_
