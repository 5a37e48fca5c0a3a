#include "ps_server/hash_table.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/counter_rng.h"
#include "common/initializer.h"
#include "common/optimizer/narrow_row_step.h"
#include "common/process/fault_point.h"
#include "glog/logging.h"
#include "partitioners/hash_routing.h"
#include "ps_server/spilled_id_filter.h"

namespace tessera {
namespace {

constexpr uint32_t kEmpty = 0xFFFFFFFFu;  // index entry of no row
constexpr uint32_t kNoRow = 0xFFFFFFFFu;  // end of the free list
constexpr uint32_t kFreeBit = 1u << 31;
constexpr uint32_t kSurvivedBit = 1u << 30;  // lived through a sweep
constexpr uint32_t kCountMask = kSurvivedBit - 1;
constexpr int kMaxSlots = 8;
constexpr int64_t kBlockBytes = 256 << 10;
constexpr int kStripeShift = 58;
// Lookups whose index entries and records are fetched together
// (PrefetchWindow): enough to keep the memory system busy, few enough
// that the first is still in cache when the last arrives.
constexpr int kPrefetchWindow = 32;  // top 6 bits of the hash pick the stripe
static_assert(HashTable::kStripes == 1 << (64 - kStripeShift),
              "stripe bits and stripe count disagree");

// The start of every record. Tables without eviction or a memory budget
// keep only `id` (kShortHeader bytes): nothing is ever freed or swept
// there. A free record keeps the next free record number in `id` and has
// kFreeBit in `state`.
struct RowHeader {
  int64_t id;
  uint32_t last_seen;  // low 32 bits of the step of the last pull or push
  uint32_t state;      // kFreeBit | kSurvivedBit | push count
};
static_assert(sizeof(RowHeader) == 16, "row header must stay 16 bytes");
constexpr int64_t kShortHeader = sizeof(int64_t);
// A stripe short of room moves 1/kSpillShare of its rows to disk at once,
// so one scan of its headers pays for many new rows.
constexpr uint32_t kSpillShare = 16;
// A row's age counts divided by its pushes, up to this many (so a row
// once hot but no longer touched still leaves, at 16 times the age).
constexpr uint64_t kMaxSpillCount = 16;
constexpr uint64_t kSpillCountScale = 720720;  // lcm(1..16): exact

// The in-table hash. Distinct from HashRoutingMix on purpose: the ids of a
// shard all share HashShardOf(id, n), so reusing the routing hash would
// leave their index slots biased.
inline uint64_t TableHash(int64_t id) {
  return CounterHash(0x7E55E4A7AB1E5EEDull, static_cast<uint64_t>(id));
}
inline int StripeOf(uint64_t hash) {
  return static_cast<int>(hash >> kStripeShift);
}
inline uint32_t TagOf(uint64_t hash) { return (hash >> 48) & 0xFF; }

inline RowHeader* Header(char* record) {
  return reinterpret_cast<RowHeader*>(record);
}

size_t IndexCapacityFor(int64_t rows) {
  size_t capacity = 16;
  while (static_cast<int64_t>(capacity) * 3 / 4 < rows) capacity *= 2;
  return capacity;
}

// Sets `scratch`'s seed for row `id` and fills the row's initial values.
void FillRowInit(Initializer* scratch, uint64_t seed, int64_t id,
                 absl::Span<float> out) {
  scratch->set_seed(DeriveSeed(seed, static_cast<uint64_t>(id)));
  FillInitialValues(*scratch, 0, out);
}

// Applies `def`'s eviction rules to one row's header at step `now` (and
// marks it swept); true when the row is to go.
bool Doomed(const ShardDef& def, RowHeader* header, uint32_t now) {
  const int64_t unseen_steps = def.evict_unseen_steps();
  const int64_t min_count = def.evict_min_count();
  // Unsigned difference: right across the 32-bit wrap of the step.
  bool evict =
      unseen_steps > 0 && static_cast<uint32_t>(now - header->last_seen) >=
                              static_cast<uint64_t>(unseen_steps);
  if (!evict && min_count > 0 &&
      (header->state & kCountMask) < static_cast<uint64_t>(min_count)) {
    evict = header->state & kSurvivedBit;
    header->state |= kSurvivedBit;
  }
  return evict;
}

}  // namespace

void HashRowInitialValues(const Initializer& init, int64_t id,
                          absl::Span<float> out) {
  Initializer scratch = init;
  FillRowInit(&scratch, init.seed(), id, out);
}

struct HashTable::Stripe {
  mutable absl::Mutex mu;
  std::vector<uint32_t> index ABSL_GUARDED_BY(mu);  // (row << 8) | tag
  std::vector<std::unique_ptr<char[]>> blocks ABSL_GUARDED_BY(mu);
  uint32_t high_water ABSL_GUARDED_BY(mu) = 0;  // records handed out
  uint32_t free_head ABSL_GUARDED_BY(mu) = kNoRow;
  uint32_t live ABSL_GUARDED_BY(mu) = 0;
  Initializer init ABSL_GUARDED_BY(mu);  // scratch copy for new rows
  // Every id this stripe moved to the disk tier: a lookup of any other
  // (every new row) skips the database.
  SpilledIdFilter spilled ABSL_GUARDED_BY(mu);
  // Rows read back from the disk tier whose disk copies are still there:
  // deleted in one write when the batch is done with the stripe
  // (DeleteReloaded), not one write each. Empty whenever mu is free.
  std::vector<int64_t> reloaded ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<HashTable>> HashTable::Create(
    const ShardDef& def, const Optimizer* optimizer,
    std::shared_ptr<RowMemoryBudget> budget) {
  auto bad = [&](auto... what) {
    return absl::InvalidArgumentError(
        absl::StrCat("hash table shard ", def.name(), ": ", what...));
  };
  if (def.dtype() != DT_FLOAT) return bad("only float32 tables are supported");
  // A growing table has no whole to step: rows it does not hold yet would
  // move on their creation only.
  if (optimizer->table_updates() == TABLE_UPDATES_DENSE &&
      !optimizer->row_wise()) {
    return bad(
        "a growing table takes lazy updates only, but its optimizer has "
        "table_updates TABLE_UPDATES_DENSE");
  }
  if (def.dim() <= 0 || def.dim() > (int64_t{1} << 20)) {
    return bad("dim must be in [1, 2^20], got ", def.dim());
  }
  if (def.num_shards() < 0 ||
      (def.num_shards() == 0
           ? def.index() != 0
           : def.index() < 0 || def.index() >= def.num_shards())) {
    return bad("index ", def.index(), " is not a shard of num_shards ",
               def.num_shards());
  }
  const int64_t max_rows = int64_t{kStripes} * (kMaxRowsPerStripe / 2);
  if (def.expected_rows() < 0 || def.expected_rows() > max_rows) {
    return bad("expected_rows must be in [0, ", max_rows, "], got ",
               def.expected_rows());
  }
  if (def.evict_unseen_steps() < 0 || def.evict_min_count() < 0 ||
      def.evict_interval_steps() < 0) {
    return bad("eviction settings must be >= 0, got evict_unseen_steps ",
               def.evict_unseen_steps(), ", evict_min_count ",
               def.evict_min_count(), ", evict_interval_steps ",
               def.evict_interval_steps());
  }
  if (def.evict_unseen_steps() >= (int64_t{1} << 31)) {
    return bad("evict_unseen_steps must be below 2^31, got ",
               def.evict_unseen_steps());
  }
  if (!RowPrecision_IsValid(def.precision())) {
    return bad("precision ", def.precision(),
               " is not one of ROW_FP32, ROW_FP16, ROW_BF16");
  }
  if (optimizer->num_slots() > kMaxSlots) {
    return bad("optimizer ", optimizer->name(), " has too many slots");
  }
  if (absl::Status s = ValidateInitializer(def.initializer()); !s.ok()) {
    return bad(s.message());
  }
  try {
    return std::unique_ptr<HashTable>(
        new HashTable(def, optimizer, std::move(budget)));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "hash table shard ", def.name(), ": out of memory reserving ",
        def.expected_rows(), " rows"));
  }
}

namespace {

int64_t ValuesBytes(RowPrecision precision, int64_t dim) {
  // Padded to 4 so the fp32 slots after them stay aligned.
  return (dim * RowPrecisionBytes(precision) + 3) / 4 * 4;
}

std::vector<int64_t> SlotOffsets(const Optimizer& optimizer, int64_t dim) {
  std::vector<int64_t> offsets = {0};
  for (int k = 0; k < optimizer.num_slots(); ++k) {
    offsets.push_back(offsets.back() + optimizer.slot_row_elements(k, dim));
  }
  return offsets;
}

int64_t RecordBytes(int64_t header, int64_t values_bytes, int64_t slot_floats) {
  // Rounded to 8 so every record's 64-bit id stays aligned.
  return (header + values_bytes + slot_floats * 4 + 7) / 8 * 8;
}

// Under a budget, a block is at most 1/(kStripes * kBudgetBlocksPerTable)
// of its limit: every stripe a row lands in takes its first block whatever
// the budget says, so a table's least footprint is a block per stripe, and
// at most 1/32 of the budget for it. Without the cap, DLRM's 26 tables
// took 26 x 64 blocks of 135 KB, 225 MB, under a 55 MB budget.
constexpr int64_t kBudgetBlocksPerTable = 32;

uint32_t RowsPerBlock(int64_t record_bytes, int64_t expected_rows,
                      const RowMemoryBudget* budget) {
  int64_t block_bytes = kBlockBytes;
  if (budget != nullptr) {
    block_bytes = std::min(
        block_bytes,
        budget->limit_bytes() / (HashTable::kStripes * kBudgetBlocksPerTable));
  }
  const int64_t most = std::max<int64_t>(1, block_bytes / record_bytes);
  const int64_t least = std::min<int64_t>(16, most);
  // About 1/32 of a stripe's expected rows, so the last, partly used block
  // of each stripe wastes little.
  const int64_t want =
      expected_rows > 0 ? expected_rows / HashTable::kStripes / 32 : 256;
  // A power of two, so finding a record is a shift and a mask.
  int64_t rows = std::clamp(want, least, most);
  while (rows & (rows - 1)) rows &= rows - 1;
  return static_cast<uint32_t>(rows);
}

int64_t EvictInterval(const ShardDef& def) {
  if (def.evict_interval_steps() > 0) return def.evict_interval_steps();
  if (def.evict_unseen_steps() > 0) return def.evict_unseen_steps();
  if (def.evict_min_count() > 0) return 1000;
  return 0;
}

}  // namespace

HashTable::HashTable(const ShardDef& def, const Optimizer* optimizer,
                     std::shared_ptr<RowMemoryBudget> budget)
    : def_(def),
      optimizer_(optimizer),
      dim_(def.dim()),
      num_slots_(optimizer->num_slots()),
      budget_(std::move(budget)),
      evicts_(def.evict_unseen_steps() > 0 || def.evict_min_count() > 0),
      track_seen_(evicts_ || budget_ != nullptr),
      header_bytes_(track_seen_ ? sizeof(RowHeader) : kShortHeader),
      precision_(def.precision()),
      rounding_seed_(RowTableSeed(def.variable(), def.initializer().seed())),
      values_bytes_(ValuesBytes(def.precision(), def.dim())),
      slot_offsets_(SlotOffsets(*optimizer, def.dim())),
      record_bytes_(
          RecordBytes(header_bytes_, values_bytes_, slot_offsets_.back())),
      rows_per_block_(
          RowsPerBlock(record_bytes_, def.expected_rows(), budget_.get())),
      block_shift_(__builtin_ctz(rows_per_block_)),
      max_rows_(int64_t{kStripes} * (kMaxRowsPerStripe / 2)),
      evict_interval_(EvictInterval(def)),
      stripes_(new Stripe[kStripes]) {
  const int64_t per_stripe = (def.expected_rows() + kStripes - 1) / kStripes;
  for (int k = 0; k < kStripes; ++k) {
    Stripe& s = stripes_[k];
    absl::MutexLock lock(&s.mu);
    s.index.assign(IndexCapacityFor(per_stripe), kEmpty);
    s.blocks.reserve((per_stripe + rows_per_block_ - 1) / rows_per_block_);
    s.init = def_.initializer();
    AddAllocated(StripeBytes(s));
  }
}

void HashTable::AddAllocated(int64_t bytes) {
  allocated_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (budget_ != nullptr) budget_->Charge(bytes);
}

int64_t HashTable::StripeBytes(const Stripe& s) const {
  return static_cast<int64_t>(s.index.capacity() * sizeof(uint32_t) +
                              s.blocks.capacity() * sizeof(s.blocks[0])) +
         s.spilled.bytes() +
         static_cast<int64_t>(s.blocks.size()) * rows_per_block_ *
             record_bytes_;
}

HashTable::~HashTable() {
  if (budget_ != nullptr) {
    budget_->Charge(-allocated_bytes_.load(std::memory_order_relaxed));
  }
}

char* HashTable::Record(const Stripe& s, uint32_t row) const {
  return s.blocks[row >> block_shift_].get() +
         static_cast<int64_t>(row & (rows_per_block_ - 1)) * record_bytes_;
}

void HashTable::InitRecord(Stripe& s, int64_t id, char* record) {
  RowHeader* header = Header(record);
  header->id = id;
  if (track_seen_) {
    header->last_seen = 0;
    header->state = 0;
  }
  if (narrow()) {
    thread_local std::vector<float> wide;
    wide.resize(dim_);
    FillRowInit(&s.init, def_.initializer().seed(), id, absl::MakeSpan(wide));
    NarrowRowNearest(precision_, wide.data(), Stored(record), dim_);
  } else {
    FillRowInit(&s.init, def_.initializer().seed(), id,
                absl::MakeSpan(reinterpret_cast<float*>(Stored(record)), dim_));
  }
  float* slots = Slots(record);
  for (int k = 0; k < num_slots_; ++k) {
    std::fill(slots + slot_offsets_[k], slots + slot_offsets_[k + 1],
              optimizer_->slot_initial_value(k));
  }
}

char* HashTable::FindOrCreate(Stripe& s, int64_t id, uint64_t hash,
                              bool* fresh) {
  const uint32_t tag = TagOf(hash);
  size_t mask = s.index.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const uint32_t e = s.index[i];
    if (e == kEmpty) break;
    if ((e & 0xFF) == tag) {
      char* record = Record(s, e >> 8);
      if (Header(record)->id == id) return record;
    }
  }
  if (s.live >= kMaxRowsPerStripe) return nullptr;
  // Before the index slot is chosen: a spill moves index entries.
  uint32_t row;
  char* record = AllocateRecord(s, &row);
  if (record == nullptr) return nullptr;
  bool reloaded = false;
  RowDiskStore* disk = disk_ptr_.load(std::memory_order_acquire);
  // A row of this stripe went to disk under this stripe's lock, so the
  // count and the filter include it if it is there.
  if (disk != nullptr && disk->rows() > 0 && s.spilled.MayContain(id)) {
    disk_lookups_.fetch_add(1, std::memory_order_relaxed);
    absl::StatusOr<bool> found = disk->Get(id, record);
    CHECK(found.ok()) << "hash table shard " << def_.name()
                      << " lost its disk tier: " << found.status();
    reloaded = *found;
    if (reloaded) s.reloaded.push_back(id);
  }
  if (reloaded) {
    reloaded_.fetch_add(1, std::memory_order_relaxed);
  } else {
    InitRecord(s, id, record);
  }
  if (fresh != nullptr) *fresh = !reloaded;
  if ((s.live + 1) * size_t{4} > s.index.size() * 3) Grow(s);
  mask = s.index.size() - 1;
  size_t i = hash & mask;
  while (s.index[i] != kEmpty) i = (i + 1) & mask;
  s.index[i] = (row << 8) | tag;
  ++s.live;
  rows_.fetch_add(1, std::memory_order_relaxed);
  return record;
}

char* HashTable::AllocateRecord(Stripe& s, uint32_t* row) {
  if (s.free_head == kNoRow &&
      (s.high_water >> block_shift_) >= s.blocks.size()) {
    const int64_t block_bytes = int64_t{rows_per_block_} * record_bytes_;
    // A stripe with no block takes one whatever the budget says: it has
    // no rows to move out.
    bool charged = false;
    if (budget_ != nullptr && !s.blocks.empty()) {
      charged = budget_->TryCharge(block_bytes);
      if (!charged) Spill(s);
    }
    if (s.free_head == kNoRow) {
      // Uninitialised on purpose: a record is written when handed out.
      char* block = new (std::nothrow) char[block_bytes];
      if (block == nullptr) {
        if (charged) budget_->Charge(-block_bytes);
        return nullptr;
      }
      // Under a budget that reads the resident memory, a block granted
      // must count at once: touched now, not row by row. Under the
      // stripe's lock, as the caller holds it from the lookup to writing
      // the record; a block is at most kBlockBytes (64 pages of 4 KiB),
      // little beside the spill that comes before most grants.
      if (budget_ != nullptr && budget_->reads_resident_memory()) {
        static const int64_t page_bytes = sysconf(_SC_PAGESIZE);
        for (int64_t page = 0; page < block_bytes; page += page_bytes) {
          static_cast<volatile char*>(block)[page] = 0;
        }
      }
      const int64_t before = StripeBytes(s);
      s.blocks.emplace_back(block);
      const int64_t grown = StripeBytes(s) - before;
      allocated_bytes_.fetch_add(grown, std::memory_order_relaxed);
      if (budget_ != nullptr) {
        budget_->Charge(grown - (charged ? block_bytes : 0));
      }
    }
  }
  if (s.free_head != kNoRow) {
    *row = s.free_head;
    char* record = Record(s, *row);
    s.free_head = static_cast<uint32_t>(Header(record)->id);
    return record;
  }
  *row = s.high_water++;
  return Record(s, *row);
}

void HashTable::DeleteReloaded(Stripe& s) {
  if (s.reloaded.empty()) return;
  const absl::Status deleted = Disk()->Delete(s.reloaded);
  CHECK(deleted.ok()) << "hash table shard " << def_.name()
                      << " lost its disk tier: " << deleted;
  s.reloaded.clear();
}

void HashTable::Spill(Stripe& s) {
  // First: a row brought back in this batch may go out again below, and
  // its pending delete must not land after its new copy.
  DeleteReloaded(s);
  const uint32_t now = static_cast<uint32_t>(version());
  thread_local std::vector<std::pair<uint64_t, uint32_t>> by_age;
  by_age.clear();
  for (uint32_t row = 0; row < s.high_water; ++row) {
    const RowHeader* header = Header(Record(s, row));
    if (header->state & kFreeBit) continue;
    // Unsigned difference: right across the 32-bit wrap of the step. The
    // age is divided by the pushes so far: under a Zipf law most rows are
    // pushed once and never again, and plain LRU sent rows pushed often
    // but not lately to disk only to take them back (a third of the
    // DLRM epoch's spills; 26% fewer reloads this way).
    const uint64_t age = now - header->last_seen;
    const uint64_t count =
        std::clamp<uint64_t>(header->state & kCountMask, 1, kMaxSpillCount);
    by_age.emplace_back(age * kSpillCountScale / count, row);
  }
  if (by_age.empty()) return;
  const size_t n = std::max<size_t>(1, by_age.size() / kSpillShare);
  // The n of the greatest weighted age first; among equals the lower
  // record, so a spill is a function of the table's history.
  std::nth_element(by_age.begin(), by_age.begin() + (n - 1), by_age.end(),
                   [](const auto& a, const auto& b) {
                     return a.first != b.first ? a.first > b.first
                                               : a.second < b.second;
                   });
  thread_local std::vector<int64_t> ids;
  thread_local std::vector<const char*> records;
  ids.clear();
  records.clear();
  const int64_t before = StripeBytes(s);
  for (size_t k = 0; k < n; ++k) {
    char* record = Record(s, by_age[k].second);
    ids.push_back(Header(record)->id);
    records.push_back(record);
    // Before the write: a row on disk is always in the filter.
    s.spilled.Add(ids.back());
  }
  AddAllocated(StripeBytes(s) - before);
  const absl::Status put = Disk()->Put(ids, records);
  CHECK(put.ok()) << "hash table shard " << def_.name()
                  << " cannot spill rows to its disk tier: " << put;
  // tests: a server killed with the rows on disk and still in memory.
  FaultPoint("spill");
  for (size_t k = 0; k < n; ++k) Remove(s, by_age[k].second);
  spilled_.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
}

RowDiskStore* HashTable::Disk() {
  RowDiskStore* disk = disk_ptr_.load(std::memory_order_acquire);
  if (disk != nullptr) return disk;
  absl::MutexLock lock(&disk_mu_);
  if (disk_ == nullptr) {
    absl::StatusOr<std::unique_ptr<RowDiskStore>> opened = RowDiskStore::Open(
        budget_->disk_database(), record_bytes_,
        [](int64_t id) -> uint32_t { return StripeOf(TableHash(id)); });
    CHECK(opened.ok()) << "hash table shard " << def_.name()
                       << " cannot open its disk tier: " << opened.status();
    disk_ = *std::move(opened);
    disk_ptr_.store(disk_.get(), std::memory_order_release);
  }
  return disk_.get();
}

int64_t HashTable::disk_rows() const {
  const RowDiskStore* disk = disk_ptr_.load(std::memory_order_acquire);
  return disk == nullptr ? 0 : disk->rows();
}

std::string HashTable::disk_directory() const {
  const RowDiskStore* disk = disk_ptr_.load(std::memory_order_acquire);
  return disk == nullptr ? std::string() : disk->directory();
}

void HashTable::Grow(Stripe& s) {
  const int64_t before = StripeBytes(s);
  std::vector<uint32_t> old(s.index.size() * 2, kEmpty);
  old.swap(s.index);
  AddAllocated(StripeBytes(s) - before);
  const size_t mask = s.index.size() - 1;
  for (uint32_t e : old) {
    if (e == kEmpty) continue;
    size_t i = TableHash(Header(Record(s, e >> 8))->id) & mask;
    while (s.index[i] != kEmpty) i = (i + 1) & mask;
    s.index[i] = e;
  }
}

size_t HashTable::SlotOf(const Stripe& s, uint32_t row, uint64_t hash) const {
  const size_t mask = s.index.size() - 1;
  size_t i = hash & mask;
  // kEmpty >> 8 is above every record number, so it never matches.
  while ((s.index[i] >> 8) != row) {
    i = (i + 1) & mask;
  }
  return i;
}

void HashTable::Remove(Stripe& s, uint32_t row) {
  char* record = Record(s, row);
  const size_t mask = s.index.size() - 1;
  size_t hole = SlotOf(s, row, TableHash(Header(record)->id));
  // Backward-shift deletion keeps linear probing correct without
  // tombstones: move each later entry of the run into the hole unless its
  // home slot lies cyclically in (hole, j].
  for (size_t j = (hole + 1) & mask; s.index[j] != kEmpty; j = (j + 1) & mask) {
    const size_t home =
        TableHash(Header(Record(s, s.index[j] >> 8))->id) & mask;
    const bool stays =
        hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    s.index[hole] = s.index[j];
    hole = j;
  }
  s.index[hole] = kEmpty;
  Header(record)->id = s.free_head;
  Header(record)->state = kFreeBit;
  s.free_head = row;
  --s.live;
  rows_.fetch_sub(1, std::memory_order_relaxed);
}

HashTable::Batch& HashTable::GroupByStripe(absl::Span<const int64_t> ids) {
  thread_local Batch batch;
  const size_t n = ids.size();
  batch.hashes.resize(n);
  batch.order.resize(n);
  batch.starts.assign(kStripes + 1, 0);
  int* starts = batch.starts.data();
  uint64_t* hashes = batch.hashes.data();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = TableHash(ids[i]);
    hashes[i] = h;
    ++starts[StripeOf(h) + 1];
  }
  for (int k = 0; k < kStripes; ++k) starts[k + 1] += starts[k];
  batch.next.assign(starts, starts + kStripes);
  int* next = batch.next.data();
  int* order = batch.order.data();
  for (size_t i = 0; i < n; ++i) {
    order[next[StripeOf(hashes[i])]++] = static_cast<int>(i);
  }
  return batch;
}

void HashTable::PrefetchWindow(const Stripe& s, const Batch& batch, int begin,
                               int end, int64_t record_bytes) const {
  // A lookup is two dependent cache misses, its index entry and then its
  // record. Taken one id at a time they cost two memory latencies each;
  // here a window's index entries are all requested first, then (once
  // they arrive, in parallel) every record each names, all its lines the
  // caller touches (a dim-64 Adagrad row spans 9), so the lookups that
  // follow find them in cache.
  constexpr int64_t kLine = 64;
  constexpr int64_t kMaxLines = 32;
  constexpr int kMaxProbe = 4;
  const size_t mask = s.index.size() - 1;
  const uint32_t* index = s.index.data();
  const uint64_t* hashes = batch.hashes.data();
  const int* order = batch.order.data();
  for (int j = begin; j < end; ++j) {
    __builtin_prefetch(&index[hashes[order[j]] & mask]);
  }
  const int64_t lines = std::min(kMaxLines, (record_bytes + kLine - 1) / kLine);
  for (int j = begin; j < end; ++j) {
    const uint64_t hash = hashes[order[j]];
    const uint32_t tag = TagOf(hash);
    size_t i = hash & mask;
    // The first entry of the probe run with the row's tag: almost always
    // the row itself, and on the same index line as the home slot.
    for (int probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & mask) {
      const uint32_t e = index[i];
      if (e == kEmpty) break;
      if ((e & 0xFF) != tag) continue;
      const char* record = Record(s, e >> 8);
      for (int64_t l = 0; l < lines; ++l) {
        __builtin_prefetch(record + l * kLine);
      }
      break;
    }
  }
}

absl::Status HashTable::CheckIds(absl::Span<const int64_t> ids) const {
  const int n = def_.num_shards();
  if (n > 1) {
    for (int64_t id : ids) {
      const int owner = HashShardOf(id, n);
      if (owner != def_.index()) {
        return absl::OutOfRangeError(
            absl::StrCat("id ", id, " is out of range for shard ", def_.name(),
                         ": HashShardOf routes it to shard ", owner, " of the ",
                         n, " shards of hash table ", def_.variable(),
                         ", not to shard ", def_.index()));
      }
    }
  }
  if (rows() + static_cast<int64_t>(ids.size()) > max_rows_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("hash table shard ", def_.name(), " holds ", rows(),
                     " rows and cannot take ", ids.size(), " more (at most ",
                     max_rows_, ")"));
  }
  return absl::OkStatus();
}

int64_t HashTable::ReadAs(absl::Span<const int64_t> ids, RowPrecision wire,
                          void* dst) {
  const Batch& batch = GroupByStripe(ids);
  const uint64_t* hashes = batch.hashes.data();
  const int* order = batch.order.data();
  const int* starts = batch.starts.data();
  const int64_t step = version();
  // As stored (fp32, or a narrow table pulled narrow): one copy per row.
  const bool widen = wire == ROW_FP32 && narrow();
  const int64_t out_bytes = dim_ * RowPrecisionBytes(widen ? ROW_FP32 : wire);
  char* const base = static_cast<char*>(dst);
  // A pull touches the header and the values, not the slots.
  const int64_t touched = header_bytes_ + values_bytes_;
  for (int k = 0; k < kStripes; ++k) {
    if (starts[k] == starts[k + 1]) continue;
    Stripe& s = stripes_[k];
    absl::MutexLock lock(&s.mu);
    for (int j = starts[k]; j < starts[k + 1]; ++j) {
      if ((j - starts[k]) % kPrefetchWindow == 0) {
        PrefetchWindow(s, batch, j,
                       std::min(j + kPrefetchWindow, starts[k + 1]), touched);
      }
      const int i = order[j];
      char* out = base + static_cast<int64_t>(i) * out_bytes;
      char* record = FindOrCreate(s, ids[i], hashes[i]);
      if (record == nullptr) {
        // No room: serve the row's initial value without keeping it.
        thread_local std::vector<float> init;
        init.resize(dim_);
        FillRowInit(&s.init, def_.initializer().seed(), ids[i],
                    absl::MakeSpan(init));
        if (widen || !narrow()) {
          std::memcpy(out, init.data(), out_bytes);
        } else {
          NarrowRowNearest(precision_, init.data(), out, dim_);
        }
        continue;
      }
      if (track_seen_) Header(record)->last_seen = static_cast<uint32_t>(step);
      if (widen) {
        WidenRow(precision_, Stored(record), reinterpret_cast<float*>(out),
                 dim_);
      } else {
        std::memcpy(out, Stored(record), out_bytes);
      }
    }
    DeleteReloaded(s);
  }
  return step;
}

int64_t HashTable::Apply(absl::Span<const int64_t> ids,
                         absl::Span<const float> grads, int64_t schedule_step) {
  const Batch& batch = GroupByStripe(ids);
  const uint64_t* hashes = batch.hashes.data();
  const int* order = batch.order.data();
  const int* starts = batch.starts.data();
  absl::ReaderMutexLock whole_push(&apply_mu_);
  const int64_t t = step_.fetch_add(1, std::memory_order_acq_rel) + 1;
  const UpdateStep update(t, schedule_step > 0 ? schedule_step : t);
  float* slots[kMaxSlots];
  int64_t dropped = 0;
  NarrowRowStep narrow_step(*optimizer_, precision_, update, rounding_seed_, t);
  for (int k = 0; k < kStripes; ++k) {
    if (starts[k] == starts[k + 1]) continue;
    Stripe& s = stripes_[k];
    absl::MutexLock lock(&s.mu);
    for (int j = starts[k]; j < starts[k + 1]; ++j) {
      if ((j - starts[k]) % kPrefetchWindow == 0) {
        PrefetchWindow(s, batch, j,
                       std::min(j + kPrefetchWindow, starts[k + 1]),
                       record_bytes_);
      }
      const int i = order[j];
      char* record = FindOrCreate(s, ids[i], hashes[i]);
      if (record == nullptr) {
        ++dropped;
        continue;
      }
      if (track_seen_) {
        RowHeader* header = Header(record);
        header->last_seen = static_cast<uint32_t>(t);
        if ((header->state & kCountMask) != kCountMask) ++header->state;
      }
      float* row_slots = Slots(record);
      for (int m = 0; m < num_slots_; ++m) {
        slots[m] = row_slots + slot_offsets_[m];
      }
      const float* grad = grads.data() + static_cast<int64_t>(i) * dim_;
      if (narrow()) {
        narrow_step.Apply(Stored(record), grad, slots, dim_, ids[i]);
      } else {
        optimizer_->Apply(reinterpret_cast<float*>(Stored(record)), grad, slots,
                          dim_, update);
      }
    }
    DeleteReloaded(s);
  }
  if (dropped > 0) {
    LOG_EVERY_N(ERROR, 1000) << "hash table shard " << def_.name()
                             << ": out of memory or row capacity, dropped "
                             << dropped << " row updates";
  }
  MaybeEvict(t);
  return t;
}

void HashTable::MaybeEvict(int64_t step) {
  if (evict_interval_ > 0 && step % evict_interval_ == 0) Evict();
}

int64_t HashTable::Evict() {
  const int64_t unseen_steps = def_.evict_unseen_steps();
  const int64_t min_count = def_.evict_min_count();
  if (unseen_steps <= 0 && min_count <= 0) return 0;
  absl::MutexLock sweep(&evict_mu_);
  const uint32_t now = static_cast<uint32_t>(version());
  int64_t evicted = 0;
  std::vector<uint32_t> doomed;
  for (int k = 0; k < kStripes; ++k) {
    Stripe& s = stripes_[k];
    absl::MutexLock lock(&s.mu);
    doomed.clear();
    for (uint32_t row = 0; row < s.high_water; ++row) {
      RowHeader* header = Header(Record(s, row));
      if (header->state & kFreeBit) continue;
      if (Doomed(def_, header, now)) doomed.push_back(row);
    }
    for (uint32_t row : doomed) Remove(s, row);
    evicted += static_cast<int64_t>(doomed.size());
  }
  if (disk_rows() > 0) evicted += EvictFromDisk(now);
  return evicted;
}

int64_t HashTable::EvictFromDisk(uint32_t now) {
  // The table held still, so no row moves between the tiers meanwhile.
  // Rare (a sweep per evict_interval_steps), and the disk tier is read
  // once, in order.
  RowDiskStore* disk = Disk();
  constexpr size_t kBatch = 4096;
  std::vector<int64_t> doomed;
  std::vector<int64_t> marked;
  std::string marked_bytes;
  int64_t evicted = 0;
  auto flush = [&] {
    if (!doomed.empty()) {
      const absl::Status s = disk->Delete(doomed);
      CHECK(s.ok()) << "hash table shard " << def_.name() << ": " << s;
      evicted += static_cast<int64_t>(doomed.size());
      doomed.clear();
    }
    if (!marked.empty()) {
      std::vector<const char*> records;
      for (size_t k = 0; k < marked.size(); ++k) {
        records.push_back(marked_bytes.data() + k * record_bytes_);
      }
      const absl::Status s = disk->Overwrite(marked, records);
      CHECK(s.ok()) << "hash table shard " << def_.name() << ": " << s;
      marked.clear();
      marked_bytes.clear();
    }
  };
  LockAllStripes();
  const absl::Status read = disk->ForEach([&](int64_t id, const char* stored) {
    std::string record(stored, record_bytes_);
    RowHeader* header = Header(record.data());
    const uint32_t state = header->state;
    if (Doomed(def_, header, now)) {
      doomed.push_back(id);
    } else if (header->state != state) {
      marked.push_back(id);
      marked_bytes += record;
    }
    if (doomed.size() + marked.size() >= kBatch) flush();
  });
  CHECK(read.ok()) << "hash table shard " << def_.name()
                   << " lost its disk tier: " << read;
  flush();
  UnlockAllStripes();
  return evicted;
}

bool HashTable::Contains(int64_t id) const {
  const uint64_t hash = TableHash(id);
  const Stripe& s = stripes_[StripeOf(hash)];
  absl::MutexLock lock(&s.mu);
  const size_t mask = s.index.size() - 1;
  for (size_t i = hash & mask; s.index[i] != kEmpty; i = (i + 1) & mask) {
    const uint32_t e = s.index[i];
    if ((e & 0xFF) == TagOf(hash) && Header(Record(s, e >> 8))->id == id) {
      return true;
    }
  }
  const RowDiskStore* disk = disk_ptr_.load(std::memory_order_acquire);
  if (disk == nullptr || disk->rows() == 0 || !s.spilled.MayContain(id)) {
    return false;
  }
  disk_lookups_.fetch_add(1, std::memory_order_relaxed);
  std::vector<char> record(record_bytes_);
  absl::StatusOr<bool> found = disk->Get(id, record.data());
  CHECK(found.ok()) << "hash table shard " << def_.name()
                    << " lost its disk tier: " << found.status();
  return *found;
}

int64_t HashTable::resident_bytes() const {
  return static_cast<int64_t>(sizeof(*this) + kStripes * sizeof(Stripe)) +
         allocated_bytes_.load(std::memory_order_relaxed);
}

void HashTable::LockAllStripes() const {
  for (int k = 0; k < kStripes; ++k) stripes_[k].mu.Lock();
}

void HashTable::UnlockAllStripes() const {
  for (int k = kStripes - 1; k >= 0; --k) stripes_[k].mu.Unlock();
}

absl::Status HashTable::VisitRows(
    absl::FunctionRef<absl::Status(const Rows&)> fn) const {
  absl::MutexLock no_pushes(&apply_mu_);
  absl::MutexLock no_sweeps(&evict_mu_);
  LockAllStripes();
  const Rows rows(this, version(), total_rows());
  absl::Status status = fn(rows);
  UnlockAllStripes();
  return status;
}

// Runs inside VisitRows, which holds every stripe's lock.
void HashTable::Rows::ForEach(absl::FunctionRef<void(const HashRowRef&)> fn,
                              bool widen) const {
  const HashTable& t = *table_;
  const uint32_t now = static_cast<uint32_t>(step_);
  HashRowRef ref;
  widen = widen && t.narrow();
  std::vector<float> wide(widen ? t.dim_ : 0);
  auto visit = [&](char* record) {
    const RowHeader* header = Header(record);
    if (t.track_seen_) {
      ref.steps_unseen = now - header->last_seen;
      ref.pushes = header->state & kCountMask;
      ref.swept = (header->state & kSurvivedBit) != 0;
    }
    ref.id = header->id;
    ref.stored = t.Stored(record);
    if (widen) {
      WidenRow(t.precision_, t.Stored(record), wide.data(), t.dim_);
      ref.values = wide.data();
    } else if (!t.narrow()) {
      ref.values = reinterpret_cast<const float*>(t.Stored(record));
    }
    ref.slots = t.Slots(record);
    fn(ref);
  };
  for (int k = 0; k < kStripes; ++k) {
    const Stripe& s = t.stripes_[k];
    for (uint32_t row = 0; row < s.high_water; ++row) {
      char* record = t.Record(s, row);
      // Records are freed only by eviction or a spill, which need the long
      // header.
      if (t.track_seen_ && (Header(record)->state & kFreeBit)) continue;
      visit(record);
    }
  }
  // Then the rows on disk, which the held table keeps where they are.
  const RowDiskStore* disk = t.disk_ptr_.load(std::memory_order_acquire);
  if (disk == nullptr) return;
  const absl::Status read = disk->ForEach(
      [&](int64_t, const char* record) { visit(const_cast<char*>(record)); });
  CHECK(read.ok()) << "hash table shard " << t.def_.name()
                   << " lost its disk tier: " << read;
}

absl::StatusOr<std::unique_ptr<HashTable>> HashTable::BuildFromState(
    const HashTableState& state) const {
  const size_t n = state.ids.size();
  const size_t floats = n * static_cast<size_t>(dim_);
  auto bad = [&](auto... what) {
    return absl::InvalidArgumentError(
        absl::StrCat("hash table shard ", def_.name(), ": ", what...));
  };
  bool fits = state.values.size() == floats &&
              state.slots.size() == static_cast<size_t>(num_slots_);
  for (size_t k = 0; fits && k < state.slots.size(); ++k) {
    fits = state.slots[k].size() ==
           n * static_cast<size_t>(slot_row_elements(static_cast<int>(k)));
  }
  for (const size_t size :
       {state.steps_unseen.size(), state.pushes.size(), state.swept.size()}) {
    fits = fits && (size == 0 || size == n);
  }
  if (!fits) {
    return bad("a restored state of ", n, " ids, ", state.values.size(),
               " values and ", state.slots.size(),
               " slots does not fit rows of ", dim_, " floats with ",
               num_slots_, " slots");
  }
  if (state.step < 0) return bad("a restored step must be >= 0");
  if (budget_ == nullptr && static_cast<int64_t>(n) > max_rows_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("hash table shard ", def_.name(), " cannot hold ", n,
                     " restored rows (at most ", max_rows_, ")"));
  }
  absl::StatusOr<std::unique_ptr<HashTable>> built =
      Create(def_, optimizer_, budget_);
  if (!built.ok()) return built.status();
  HashTable& table = **built;
  const int num_shards = def_.num_shards();
  const uint32_t now = static_cast<uint32_t>(state.step);
  for (size_t i = 0; i < n; ++i) {
    const int64_t id = state.ids[i];
    if (num_shards > 1 && HashShardOf(id, num_shards) != def_.index()) {
      return bad("restored id ", id, " belongs to shard ",
                 HashShardOf(id, num_shards), " of ", num_shards,
                 ", not to this one");
    }
    const uint64_t hash = TableHash(id);
    Stripe& s = table.stripes_[StripeOf(hash)];
    absl::MutexLock lock(&s.mu);
    bool fresh = false;
    char* record = table.FindOrCreate(s, id, hash, &fresh);
    table.DeleteReloaded(s);
    if (record == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "hash table shard ", def_.name(),
          ": out of memory or stripe capacity restoring ", n, " rows"));
    }
    if (!fresh) return bad("id ", id, " is restored twice");
    // Nearest: exact for values saved from this precision, and a pure
    // function of the checkpoint for fp32 ones.
    NarrowRowNearest(precision_, state.values.data() + i * dim_, Stored(record),
                     dim_);
    float* slots = Slots(record);
    for (int k = 0; k < num_slots_; ++k) {
      const int64_t e = slot_row_elements(k);
      std::memcpy(slots + slot_offsets_[k], state.slots[k].data() + i * e,
                  e * sizeof(float));
    }
    if (track_seen_) {
      RowHeader* header = Header(record);
      header->last_seen =
          now - (state.steps_unseen.empty() ? 0 : state.steps_unseen[i]);
      const uint32_t pushes = state.pushes.empty() ? 0 : state.pushes[i];
      header->state =
          std::min(pushes, kCountMask) |
          (!state.swept.empty() && state.swept[i] ? kSurvivedBit : 0);
    }
  }
  table.step_.store(state.step, std::memory_order_release);
  return built;
}

void HashTable::TakeRowsFrom(HashTable& built) {
  absl::MutexLock no_pushes(&apply_mu_);
  absl::MutexLock no_sweeps(&evict_mu_);
  // `built` is private to the caller: no lock of its is needed.
  LockAllStripes();
  for (int k = 0; k < kStripes; ++k) {
    Stripe& mine = stripes_[k];
    Stripe& theirs = built.stripes_[k];
    mine.index.swap(theirs.index);
    mine.blocks.swap(theirs.blocks);
    std::swap(mine.high_water, theirs.high_water);
    std::swap(mine.free_head, theirs.free_head);
    std::swap(mine.live, theirs.live);
    mine.spilled.Swap(theirs.spilled);
  }
  const int64_t rows = built.rows();
  built.rows_.store(this->rows(), std::memory_order_relaxed);
  rows_.store(rows, std::memory_order_relaxed);
  const int64_t bytes = built.allocated_bytes_.load(std::memory_order_relaxed);
  built.allocated_bytes_.store(allocated_bytes_.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
  allocated_bytes_.store(bytes, std::memory_order_relaxed);
  const int64_t step = built.version();
  built.step_.store(version(), std::memory_order_release);
  step_.store(step, std::memory_order_release);
  {
    // Their disk tier holds the rest of their rows; ours goes with them.
    absl::MutexLock mine(&disk_mu_);
    absl::MutexLock theirs(&built.disk_mu_);
    disk_.swap(built.disk_);
    disk_ptr_.store(disk_.get(), std::memory_order_release);
    built.disk_ptr_.store(built.disk_.get(), std::memory_order_release);
  }
  UnlockAllStripes();
}

}  // namespace tessera
