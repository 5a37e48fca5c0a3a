#ifndef TESSERA_PS_SERVER_HASH_TABLE_H_
#define TESSERA_PS_SERVER_HASH_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"
#include "ps_server/row_disk_store.h"
#include "ps_server/row_memory_budget.h"
#include "ps_server/row_table.h"

namespace tessera {

// The initial value of row `id` of a hash table made with `init` (see
// Determinism below): what a pull of a row never pushed returns.
void HashRowInitialValues(const Initializer& init, int64_t id,
                          absl::Span<float> out);

// A hash table's rows as a checkpoint holds them, in any order.
struct HashTableState {
  int64_t step = 0;  // the table's version and its optimizer's t
  std::vector<int64_t> ids;
  std::vector<float> values;  // ids.size() rows of dim, fp32
  // Per optimizer slot k, ids.size() rows of the optimizer's
  // slot_row_elements(k, dim) floats.
  std::vector<std::vector<float>> slots;
  // Eviction bookkeeping per row, or empty when unknown (every row is then
  // taken as seen now, with no pushes): steps since the row was last
  // pulled or pushed, its push count, and whether it lived through a sweep.
  std::vector<uint32_t> steps_unseen;
  std::vector<uint32_t> pushes;
  std::vector<uint8_t> swept;
};

// One row, borrowed from a table held still (HashTable::VisitRows).
struct HashRowRef {
  int64_t id = 0;
  // dim floats (a narrow row widened); null from ForEach(fn, false).
  const float* values = nullptr;
  // dim values as stored, in the table's precision (checkpoints keep them).
  const void* stored = nullptr;
  // The slots, one after another: slot k at HashTable::slot_offset(k),
  // slot_row_elements(k, dim) floats.
  const float* slots = nullptr;
  uint32_t steps_unseen = 0;  // 0, 0, false without eviction
  uint32_t pushes = 0;
  bool swept = false;
};

// One shard of a growing embedding table (ShardDef.hash_table): rows keyed
// by arbitrary int64 ids, created on their first pull or push.
//
// Determinism: a created row's values are FillInitialValues of the shard's
// initializer with its seed replaced by DeriveSeed(seed, id), elements
// 0..dim-1, so they are a pure function of (initializer, id): another
// server, a restarted one, or the same one after the row was evicted makes
// the same row. Slots start at the optimizer's slot_initial_value.
//
// Steps and eviction: every Apply is one step of the table (its version,
// and the `t` its optimizer sees, so Adam is TF's LazyAdam). A row records
// the step it was last pulled or pushed and how many pushes it got. Evict()
// drops rows unseen for def.evict_unseen_steps steps, and rows that have
// lived through a whole sweep interval with fewer than def.evict_min_count
// pushes; Apply runs it by itself every def.evict_interval_steps steps.
//
// Memory: each row is one record, its id (8 bytes; 16 with the last step
// and push count when eviction is on) followed by its values (dim of
// def.precision: 4 bytes each for fp32, 2 for fp16 and bf16, padded to 4)
// and each slot (the optimizer's slot_row_elements floats: dim for
// element-wise optimizers, 1 for rowwise_adagrad), the record rounded up
// to 8 bytes, in blocks of records of at most 256 KiB; evicted records go
// to a free list. fp16/bf16 rows are widened to fp32 for every read and
// update and rounded back stochastically (common/optimizer/row_precision.h)
// with the seed RowRoundingSeed(table, step, id): the same bits on any
// server, run or sharding. Rows are
// found through an open-addressing index of 32-bit entries (24-bit record
// number, 8-bit hash tag, so a probe rarely touches a record that does not
// match), kept at most 3/4 full and sized from def.expected_rows up front.
// Per row that is header + values + slots + 4 / load bytes; see
// resident_bytes() and bench/embedding_bench.cc for the measured ratio.
//
// Memory budget and disk tier: a table made with a RowMemoryBudget
// (tessera_ps --row_memory_budget) charges the budget what it allocates.
// When a stripe needs a new block and the budget has no room, the stripe
// moves a sixteenth of its rows to the table's disk tier (RowDiskStore)
// and reuses their records: those of the greatest age (steps since last
// pulled or pushed) divided by their push count, capped at 16 (LRU in
// batches, Paddle's SSD tables' policy, weighted so that the rows of a
// Zipf law pushed once leave before popular rows not touched lately). A row
// comes back, its whole record (values in the table's precision, slots and
// bookkeeping, so bit for bit), the next time it is pulled or pushed, and may
// send colder rows out. Each stripe keeps a Bloom filter of the ids it ever
// spilled (ps_server/spilled_id_filter.h, about 10 bits an id, charged as the
// stripe's memory), so a lookup of an id the tier never held (every new row)
// skips the database. An id is in one tier at a time. Checkpoints and eviction
// sweeps see both tiers. The tier is a cache of this server's state: a killed
// server's is discarded, and the job restores the rows from its checkpoint, as
// for any lost server. A server that cannot read its tier stops (CHECK): its
// rows would be lost, and stopping hands it to that recovery.
//
// Thread safety: all methods may be called concurrently. Ids are spread
// over kStripes stripes by hash, each with its own lock, index and records,
// so concurrent pulls and pushes of one table run in parallel. A push is
// applied stripe by stripe: a concurrent pull may see some of its rows
// updated and others not yet (the rows themselves are never torn).
class HashTable final : public RowTable {
 public:
  static constexpr int kStripes = 64;
  // Rows one stripe can hold (24-bit record numbers, one value reserved).
  static constexpr uint32_t kMaxRowsPerStripe = (1u << 24) - 2;

  // Validates def (dtype float, dim > 0, 0 <= index < num_shards, the
  // initializer, non-negative hints) and reserves room for
  // def.expected_rows rows. `optimizer` must outlive the table.
  // With `budget`, rows beyond it move to a disk tier under
  // budget->disk_root() (see above); the budget must be shared by every
  // table of the server.
  static absl::StatusOr<std::unique_ptr<HashTable>> Create(
      const ShardDef& def, const Optimizer* optimizer,
      std::shared_ptr<RowMemoryBudget> budget = nullptr);

  ~HashTable() override;
  HashTable(const HashTable&) = delete;
  HashTable& operator=(const HashTable&) = delete;

  const ShardDef& def() const override { return def_; }
  int64_t row_elements() const override { return dim_; }
  int64_t resident_bytes() const override;
  // The records of the rows held now: rows() * record_bytes().
  int64_t used_bytes() const override { return rows() * record_bytes_; }

  // Every id routed here by HashShardOf(id, def.num_shards) is valid;
  // others are OutOfRange naming the id and the shard it belongs to.
  absl::Status CheckIds(absl::Span<const int64_t> ids) const override;
  int64_t ReadAs(absl::Span<const int64_t> ids, RowPrecision wire,
                 void* dst) override;
  using RowTable::Apply;
  int64_t Apply(absl::Span<const int64_t> ids, absl::Span<const float> grads,
                int64_t schedule_step) override;

  // Rows held now.
  int64_t rows() const { return rows_.load(std::memory_order_relaxed); }
  // Pushes applied so far.
  int64_t version() const { return step_.load(std::memory_order_acquire); }
  // Bytes one row's record takes: header, values and slots.
  int64_t record_bytes() const { return record_bytes_; }
  int64_t header_bytes() const { return header_bytes_; }
  RowPrecision precision() const override { return precision_; }
  // Where slot k starts among a row's slot floats (HashRowRef::slots).
  int64_t slot_offset(int k) const { return slot_offsets_[k]; }
  int64_t slot_row_elements(int k) const {
    return slot_offsets_[k + 1] - slot_offsets_[k];
  }

  // Runs an eviction sweep now with the def's rules and returns the number
  // of rows dropped (0 when neither rule is set).
  int64_t Evict();

  // True when a row with this id is held (does not create it).
  bool Contains(int64_t id) const;

  const Optimizer& optimizer() const { return *optimizer_; }
  int num_slots() const { return num_slots_; }
  // Whether rows carry eviction bookkeeping (an eviction rule is set).
  bool tracks_seen() const { return evicts_; }

  // Rows on the disk tier (0 without a budget); rows() are those in
  // memory, total_rows() both.
  int64_t disk_rows() const;
  int64_t total_rows() const { return rows() + disk_rows(); }
  // Rows moved to the disk tier, and back, so far.
  int64_t spilled_rows() const {
    return spilled_.load(std::memory_order_relaxed);
  }
  int64_t reloaded_rows() const {
    return reloaded_.load(std::memory_order_relaxed);
  }
  // Lookups that reached the disk tier's database so far: those of ids
  // the tier may hold (a filter of the ids spilled skips the rest).
  int64_t disk_lookups() const {
    return disk_lookups_.load(std::memory_order_relaxed);
  }
  // The disk tier's folder; "" until the first spill.
  std::string disk_directory() const;

  // Every row of a table held still, for checkpoints: only valid inside
  // VisitRows.
  class Rows {
   public:
    int64_t step() const { return step_; }
    int64_t size() const { return size_; }
    // Calls `fn` for every row, in the same order on every call. Without
    // `widen` a narrow table's rows are not widened (HashRowRef::values is
    // null): for readers of the stored bits alone.
    void ForEach(absl::FunctionRef<void(const HashRowRef&)> fn,
                 bool widen = true) const ABSL_NO_THREAD_SAFETY_ANALYSIS;

   private:
    friend class HashTable;
    Rows(const HashTable* table, int64_t step, int64_t size)
        : table_(table), step_(step), size_(size) {}
    const HashTable* const table_;
    const int64_t step_;
    const int64_t size_;
  };

  // Calls `fn` with the table held still: no push, pull or eviction runs
  // until it returns, so the rows are one version and a push is either in
  // all of them or in none. The coordinator saves after joining, when no
  // traffic is expected; traffic waits meanwhile. Returns what `fn` does.
  absl::Status VisitRows(absl::FunctionRef<absl::Status(const Rows&)> fn) const;

  // Restoring a checkpoint, in two phases so that a server restoring many
  // shards changes none when any fails: BuildFromState makes a new table
  // with this one's definition holding `state` (InvalidArgument naming the
  // shard for wrong sizes, a repeated id, or an id HashShardOf routes to
  // another shard; ResourceExhausted when the rows do not fit), without
  // touching this one. TakeRowsFrom then swaps that table's rows and step
  // into this one at once. REQUIRES: `built` came from this table's
  // BuildFromState.
  absl::StatusOr<std::unique_ptr<HashTable>> BuildFromState(
      const HashTableState& state) const;
  void TakeRowsFrom(HashTable& built) ABSL_NO_THREAD_SAFETY_ANALYSIS;

 private:
  struct Stripe;

  HashTable(const ShardDef& def, const Optimizer* optimizer,
            std::shared_ptr<RowMemoryBudget> budget);

  // The record of `id` in `s`: in memory, brought back from the disk tier,
  // or created; *fresh (when given) says it was created. nullptr only when
  // the stripe is full (kMaxRowsPerStripe) or memory ran out.
  char* FindOrCreate(Stripe& s, int64_t id, uint64_t hash,
                     bool* fresh = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // A record of `s` for a new row (its number in *row): a free one, one of
  // a new block, or, when the budget has no room for a block, one freed by
  // Spill. nullptr when memory ran out.
  char* AllocateRecord(Stripe& s, uint32_t* row)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Moves a sixteenth of `s`'s rows (at least one), the greatest age per
  // push first, to the disk tier and frees their records. REQUIRES: s
  // holds rows.
  void Spill(Stripe& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Deletes the disk copies of the rows FindOrCreate brought back into
  // `s`, in one write. Every holder of s.mu that calls FindOrCreate calls
  // it before letting go, so no one else sees a row in both tiers.
  void DeleteReloaded(Stripe& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // The disk tier, opened on first use.
  RowDiskStore* Disk();
  // Counts `bytes` (negative: freed) as allocated, and charges the budget.
  void AddAllocated(int64_t bytes);
  // The eviction sweep of the disk tier's rows; their number dropped.
  int64_t EvictFromDisk(uint32_t now);
  // Index slot holding record `row`, whose id hashes to `hash`.
  size_t SlotOf(const Stripe& s, uint32_t row, uint64_t hash) const
      ABSL_SHARED_LOCKS_REQUIRED(s.mu);
  void Grow(Stripe& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Bytes `s` has allocated: its index, block list and blocks.
  int64_t StripeBytes(const Stripe& s) const ABSL_SHARED_LOCKS_REQUIRED(s.mu);
  void Remove(Stripe& s, uint32_t row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  char* Record(const Stripe& s, uint32_t row) const
      ABSL_SHARED_LOCKS_REQUIRED(s.mu);
  void InitRecord(Stripe& s, int64_t id, char* record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // One batch's lookups, laid out before any lock is taken: every id's
  // hash, and positions 0..ids.size()-1 ordered by stripe (starts[k] ..
  // starts[k+1] are stripe k's positions in `order`). Kept per thread, so
  // a steady stream of batches allocates nothing.
  struct Batch {
    std::vector<uint64_t> hashes;
    std::vector<int> order;
    std::vector<int> starts;
    std::vector<int> next;
  };
  static Batch& GroupByStripe(absl::Span<const int64_t> ids);
  void MaybeEvict(int64_t step);
  // Locks (unlocks) every stripe, in stripe order.
  void LockAllStripes() const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void UnlockAllStripes() const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Prefetches what the lookups of order[begin, end) will touch: their
  // index entries, then the first `record_bytes` of the records they name.
  void PrefetchWindow(const Stripe& s, const Batch& batch, int begin, int end,
                      int64_t record_bytes) const
      ABSL_SHARED_LOCKS_REQUIRED(s.mu);
  // A row's stored values (dim of precision_) and its fp32 slots.
  char* Stored(char* record) const { return record + header_bytes_; }
  float* Slots(char* record) const {
    return reinterpret_cast<float*>(record + header_bytes_ + values_bytes_);
  }
  bool narrow() const { return precision_ != ROW_FP32; }

  const ShardDef def_;
  const Optimizer* const optimizer_;
  const int64_t dim_;
  const int num_slots_;
  std::shared_ptr<RowMemoryBudget> budget_;  // null: all rows in memory
  const bool evicts_;                        // an eviction rule is set
  // Eviction and spilling need each row's last step and push count;
  // without either a record's header is the id alone.
  const bool track_seen_;
  const int64_t header_bytes_;
  const RowPrecision precision_;
  const uint64_t rounding_seed_;  // RowTableSeed of the variable
  const int64_t values_bytes_;    // dim stored values, padded to 4 bytes
  // Slot k's floats are [slot_offsets_[k], slot_offsets_[k + 1]) of a
  // row's slots; slot_offsets_[num_slots_] is their total.
  std::vector<int64_t> slot_offsets_;
  const int64_t record_bytes_;
  const uint32_t rows_per_block_;  // a power of two
  const int block_shift_;          // log2(rows_per_block_)
  const int64_t max_rows_;
  const int64_t evict_interval_;

  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> rows_{0};
  // The sum of StripeBytes over all stripes, kept as they grow, so that
  // resident_bytes() (every Health call) takes no stripe lock: a checkpoint
  // holds all of them while it writes the table.
  std::atomic<int64_t> allocated_bytes_{0};
  mutable absl::Mutex evict_mu_;  // one sweep at a time
  // Held shared by every Apply and exclusively by VisitRows and
  // TakeRowsFrom, so those never see a push applied to some stripes only.
  mutable absl::Mutex apply_mu_;
  std::unique_ptr<Stripe[]> stripes_;

  // The disk tier: made under disk_mu_ on the first spill, then read
  // through disk_ptr_ without it.
  mutable absl::Mutex disk_mu_;
  std::unique_ptr<RowDiskStore> disk_ ABSL_GUARDED_BY(disk_mu_);
  std::atomic<RowDiskStore*> disk_ptr_{nullptr};
  std::atomic<int64_t> spilled_{0};
  std::atomic<int64_t> reloaded_{0};
  mutable std::atomic<int64_t> disk_lookups_{0};  // Contains counts too
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_HASH_TABLE_H_
