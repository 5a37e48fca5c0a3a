#include "ps_server/row_disk_store.h"

#include <rocksdb/c.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "ps_server/rocksdb_library.h"

namespace tessera {

namespace {

// Turns a C API error (malloc'ed by RocksDB, null when none) into a
// status, freeing it.
absl::Status FromRocks(const RocksDbApi& api, char* error,
                       const std::string& directory, absl::string_view what) {
  if (error == nullptr) return absl::OkStatus();
  absl::Status status = absl::InternalError(
      absl::StrCat("disk tier ", directory, ": ", what, ": ", error));
  api.free(error);
  return status;
}

// Keys are the tier's number (8 bytes), the row's group (4) and its id
// (8), big-endian, so a tier's rows are one key range, a group's rows one
// range inside it, and a fixed width keeps RocksDB's index small.
constexpr size_t kKeyBytes = 20;
constexpr size_t kIdAt = 12;
// The block cache's size, and the least of each memtable's.
constexpr int64_t kCacheBytes = 1 << 20;
using Key = std::array<char, kKeyBytes>;

Key KeyOf(uint64_t tier, uint32_t group, int64_t id) {
  Key key;
  const uint64_t u = static_cast<uint64_t>(id);
  for (int b = 0; b < 8; ++b) {
    key[b] = static_cast<char>(tier >> (56 - 8 * b));
    key[kIdAt + b] = static_cast<char>(u >> (56 - 8 * b));
  }
  for (int b = 0; b < 4; ++b)
    key[8 + b] = static_cast<char>(group >> (24 - 8 * b));
  return key;
}

int64_t IdOf(const char* key) {
  uint64_t u = 0;
  for (size_t b = kIdAt; b < kKeyBytes; ++b)
    u = (u << 8) | static_cast<unsigned char>(key[b]);
  return static_cast<int64_t>(u);
}

}  // namespace

class RowDiskDatabase {
 public:
  RowDiskDatabase(std::string directory, int64_t bytes)
      : directory_(std::move(directory)), bytes_(bytes) {}
  ~RowDiskDatabase() {
    if (db_ == nullptr) return;
    api_->close(db_);
    api_->readoptions_destroy(reads_);
    api_->writeoptions_destroy(writes_);
    api_->cache_destroy(cache_);
    std::error_code error;
    std::filesystem::remove_all(directory_, error);
    if (error) {
      LOG(WARNING) << "disk tier " << directory_
                   << ": cannot remove the folder: " << error.message();
    }
  }

  // Opens the database the first time a tier asks (loading RocksDB);
  // later calls return how that went.
  absl::Status Open() {
    absl::MutexLock lock(&mu_);
    if (db_ != nullptr || !open_error_.ok()) return open_error_;
    open_error_ = OpenLocked();
    return open_error_;
  }

  const std::string& directory() const { return directory_; }
  // Valid once Open succeeded.
  const RocksDbApi& api() const { return *api_; }
  rocksdb_t* db() const { return db_; }
  rocksdb_readoptions_t* reads() const { return reads_; }
  rocksdb_writeoptions_t* writes() const { return writes_; }
  uint64_t NewTier() { return tiers_.fetch_add(1, std::memory_order_relaxed); }
  int64_t MemoryBytes() {
    rocksdb_t* db;
    {
      absl::MutexLock lock(&mu_);
      db = db_;
    }
    if (db == nullptr) return 0;
    int64_t total = 0;
    for (const char* property :
         {"rocksdb.cur-size-all-mem-tables", "rocksdb.block-cache-usage"}) {
      uint64_t bytes = 0;
      if (api_->property_int(db, property, &bytes) == 0) {
        total += static_cast<int64_t>(bytes);
      }
    }
    return total + ReadersBytes(db);
  }

 private:
  // The files' indexes and filters. RocksDB sums them over every file on
  // each read (2.2% of the machine in the DLRM bench, read at every block
  // a table asks of the budget); they change only when a flush or a
  // compaction ends, by about 1.3 bytes a row, so a reading up to 0.1 s
  // old is used.
  int64_t ReadersBytes(rocksdb_t* db) {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    if (now - readers_at_.load(std::memory_order_relaxed) < 100'000'000) {
      return readers_bytes_.load(std::memory_order_relaxed);
    }
    uint64_t bytes = 0;
    if (api_->property_int(db, "rocksdb.estimate-table-readers-mem", &bytes) !=
        0) {
      bytes = 0;
    }
    readers_bytes_.store(static_cast<int64_t>(bytes),
                         std::memory_order_relaxed);
    readers_at_.store(now, std::memory_order_relaxed);
    return static_cast<int64_t>(bytes);
  }

  absl::Status OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<const RocksDbApi*> api = LoadRocksDb();
    if (!api.ok()) return api.status();
    std::error_code error;
    std::filesystem::remove_all(directory_, error);
    if (!error) std::filesystem::create_directories(directory_, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("disk tier ", directory_,
                       ": cannot empty or make the folder: ", error.message()));
    }
    const RocksDbApi& rocks = **api;
    // Reads do not fill the cache (below) and the indexes and filters stay
    // out of it, so it holds next to nothing: its 1 MiB is a floor, and
    // the memory goes to the memtables: a row spilled and brought back
    // before its memtable is flushed leaves a key's tombstone to flush and
    // compact, not its record.
    rocksdb_cache_t* cache = rocks.cache_create_lru(kCacheBytes);
    rocksdb_options_t* options = rocks.options_create();
    rocks.set_create_if_missing(options, 1);
    rocks.set_error_if_exists(options, 1);
    // Bloom filters make a lookup of a row that was never spilled (every
    // new row) rarely read a block; they and the block indexes stay out of
    // the cache, pinned with their files (about 1.3 bytes per row on
    // disk), as a filter evicted by blocks would turn every lookup into
    // reads.
    rocks.set_write_buffer_size(options,
                                static_cast<size_t>(std::max<int64_t>(
                                    (bytes_ - kCacheBytes) / 2, kCacheBytes)));
    rocks.set_max_write_buffer_number(options, 2);
    rocks.set_max_open_files(options, 256);
    // Rows are floats: compression would cost time and save little.
    rocks.set_compression(options, rocksdb_no_compression);
    // A lookup reaches the disk only for a row the spilled-id filter says
    // was spilled, so it almost always finds it: the last sorted run (most
    // of the rows) needs no Bloom filter, whose building was compaction
    // CPU and whose bits were budget memory.
    rocks.set_optimize_filters_for_hits(options, 1);
    // Most lookups find the row in an older sorted run, not in the
    // memtables: a Bloom filter of the memtables' keys (2% of their
    // memory) answers those without a walk down each skip list.
    if (rocks.set_memtable_whole_key_filtering != nullptr) {
      rocks.set_memtable_whole_key_filtering(options, 1);
      rocks.set_memtable_prefix_bloom_size_ratio(options, 0.02);
    }
    // Universal compaction: every row is written at each spill and
    // deleted when it comes back, so leveled compaction's rewriting of
    // each byte at every level took half the server's CPU (perf, DLRM);
    // merging whole sorted runs writes each byte a few times, and the
    // Bloom filters keep the extra runs cheap to look up.
    rocks.set_compaction_style(options, rocksdb_universal_compaction);
    // Merge when 20 sorted runs wait, not RocksDB's 4: each merge then
    // takes more runs at once, so a spilled byte is rewritten about once
    // per DLRM epoch instead of 6 times (1.9-2.0 GB of compaction output
    // against 11 GB per server; 12 runs: 2.8-3.9 GB, 32: no faster;
    // bench/results/tables.md), for at most 20 Bloom filter probes per
    // lookup. Writes slow and stop at 3x and 4x that, as RocksDB's
    // defaults do at 5x and 9x of 4.
    rocks.set_level0_file_num_compaction_trigger(options, 20);
    rocks.set_level0_slowdown_writes_trigger(options, 60);
    rocks.set_level0_stop_writes_trigger(options, 80);
    rocksdb_block_based_table_options_t* table = rocks.table_options_create();
    rocks.set_block_cache(table, cache);
    rocks.set_filter_policy(table, rocks.filterpolicy_create_bloom(10));
    rocks.set_cache_index_and_filter_blocks(table, 0);
    rocks.set_block_based_table_factory(options, table);  // copies `table`
    rocks.table_options_destroy(table);
    char* open_error = nullptr;
    rocksdb_t* db = rocks.open(options, directory_.c_str(), &open_error);
    rocks.options_destroy(options);
    if (absl::Status s =
            FromRocks(rocks, open_error, directory_, "cannot open");
        !s.ok()) {
      rocks.cache_destroy(cache);
      return s;
    }
    api_ = &rocks;
    cache_ = cache;
    reads_ = rocks.readoptions_create();
    // A block read for a reload holds a row that leaves the disk at once,
    // beside rows of random ids: caching it only evicts another block
    // (191.9 CPU seconds for the DLRM epoch against 195.7 filling it).
    rocks.readoptions_set_fill_cache(reads_, 0);
    writes_ = rocks.writeoptions_create();
    // The tier is a cache rebuilt from the checkpoint after a crash.
    rocks.writeoptions_disable_wal(writes_, 1);
    db_ = db;
    return absl::OkStatus();
  }

  const std::string directory_;
  const int64_t bytes_;
  absl::Mutex mu_;
  absl::Status open_error_ ABSL_GUARDED_BY(mu_);
  // Set once by Open under mu_, then read without it: a tier reads them
  // only after its Open returned.
  const RocksDbApi* api_ = nullptr;
  rocksdb_t* db_ = nullptr;
  rocksdb_cache_t* cache_ = nullptr;
  rocksdb_readoptions_t* reads_ = nullptr;
  rocksdb_writeoptions_t* writes_ = nullptr;
  std::atomic<uint64_t> tiers_{0};
  std::atomic<int64_t> readers_bytes_{0};
  std::atomic<int64_t> readers_at_{0};  // steady-clock ns of readers_bytes_
};

std::shared_ptr<RowDiskDatabase> NewRowDiskDatabase(std::string directory,
                                                    int64_t memory_bytes) {
  return std::make_shared<RowDiskDatabase>(std::move(directory), memory_bytes);
}

int64_t RowDiskMemoryBytes(RowDiskDatabase& database) {
  return database.MemoryBytes();
}

absl::StatusOr<std::unique_ptr<RowDiskStore>> RowDiskStore::Open(
    std::shared_ptr<RowDiskDatabase> database, int64_t record_bytes,
    GroupOf group_of) {
  if (record_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk tier ", database->directory(),
                     ": record_bytes must be > 0, got ", record_bytes));
  }
  if (absl::Status s = database->Open(); !s.ok()) return s;
  const uint64_t tier = database->NewTier();
  return std::unique_ptr<RowDiskStore>(
      new RowDiskStore(std::move(database), tier, record_bytes, group_of));
}

RowDiskStore::RowDiskStore(std::shared_ptr<RowDiskDatabase> database,
                           uint64_t tier, int64_t record_bytes,
                           GroupOf group_of)
    : database_(std::move(database)),
      api_(database_->api()),
      db_(database_->db()),
      tier_(tier),
      record_bytes_(record_bytes),
      group_of_(group_of) {}

Key RowDiskStore::KeyOf(int64_t id) const {
  return tessera::KeyOf(tier_, group_of_ == nullptr ? 0 : group_of_(id), id);
}

RowDiskStore::~RowDiskStore() {
  // The database outlives this store when it is the server's: its rows go.
  const Key begin = tessera::KeyOf(tier_, 0, 0);
  const Key end = tessera::KeyOf(tier_ + 1, 0, 0);
  rocksdb_writebatch_t* batch = api_.writebatch_create();
  api_.writebatch_delete_range(batch, begin.data(), begin.size(), end.data(),
                               end.size());
  char* error = nullptr;
  api_.write(db_, database_->writes(), batch, &error);
  api_.writebatch_destroy(batch);
  if (absl::Status s =
          FromRocks(api_, error, directory(), "cannot delete a tier's rows");
      !s.ok()) {
    LOG(WARNING) << s;
  }
}

const std::string& RowDiskStore::directory() const {
  return database_->directory();
}

absl::Status RowDiskStore::Write(absl::Span<const int64_t> ids,
                                 absl::Span<const char* const> records,
                                 bool deletes) {
  // In key order: the memtable's skip list then inserts each key next to
  // the last (RocksDB keeps the previous insert's position), instead of
  // searching from the top for every key of a spill.
  thread_local std::vector<Key> keys;
  thread_local std::vector<uint32_t> order;
  keys.resize(ids.size());
  order.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    keys[i] = KeyOf(ids[i]);
    order[i] = static_cast<uint32_t>(i);
  }
  // Bytewise, as RocksDB compares (std::array's < compares signed chars).
  std::sort(order.begin(), order.end(), [](uint32_t a, uint32_t b) {
    return std::memcmp(keys[a].data(), keys[b].data(), kKeyBytes) < 0;
  });
  rocksdb_writebatch_t* batch = api_.writebatch_create();
  for (const uint32_t i : order) {
    const Key& key = keys[i];
    if (deletes) {
      api_.writebatch_delete(batch, key.data(), key.size());
    } else {
      api_.writebatch_put(batch, key.data(), key.size(), records[i],
                          static_cast<size_t>(record_bytes_));
    }
  }
  char* error = nullptr;
  api_.write(db_, database_->writes(), batch, &error);
  api_.writebatch_destroy(batch);
  return FromRocks(api_, error, directory(), "cannot write");
}

absl::Status RowDiskStore::Put(absl::Span<const int64_t> ids,
                               absl::Span<const char* const> records) {
  if (ids.size() != records.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk tier ", directory(), ": ", ids.size(), " ids and ",
                     records.size(), " records"));
  }
  if (absl::Status s = Write(ids, records, false); !s.ok()) return s;
  rows_.fetch_add(static_cast<int64_t>(ids.size()), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status RowDiskStore::Overwrite(absl::Span<const int64_t> ids,
                                     absl::Span<const char* const> records) {
  if (ids.size() != records.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk tier ", directory(), ": ", ids.size(), " ids and ",
                     records.size(), " records"));
  }
  return Write(ids, records, false);
}

absl::Status RowDiskStore::Delete(absl::Span<const int64_t> ids) {
  if (absl::Status s = Write(ids, {}, true); !s.ok()) return s;
  rows_.fetch_sub(static_cast<int64_t>(ids.size()), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<bool> RowDiskStore::Get(int64_t id, char* record) const {
  const Key key = KeyOf(id);
  char* error = nullptr;
  rocksdb_pinnableslice_t* value =
      api_.get_pinned(db_, database_->reads(), key.data(), key.size(), &error);
  if (absl::Status status = FromRocks(api_, error, directory(), "cannot read");
      !status.ok()) {
    if (value != nullptr) api_.pinnableslice_destroy(value);
    return status;
  }
  if (value == nullptr) return false;  // not found
  size_t size = 0;
  const char* data = api_.pinnableslice_value(value, &size);
  if (static_cast<int64_t>(size) != record_bytes_) {
    api_.pinnableslice_destroy(value);
    return absl::DataLossError(absl::StrCat("disk tier ", directory(), ": row ",
                                            id, " has ", size, " bytes, not ",
                                            record_bytes_));
  }
  std::memcpy(record, data, record_bytes_);
  api_.pinnableslice_destroy(value);
  return true;
}

absl::StatusOr<bool> RowDiskStore::Take(int64_t id, char* record) {
  absl::StatusOr<bool> found = Get(id, record);
  if (!found.ok() || !*found) return found;
  if (absl::Status s = Delete(absl::MakeConstSpan(&id, 1)); !s.ok()) return s;
  return true;
}

absl::Status RowDiskStore::ForEach(
    absl::FunctionRef<void(int64_t id, const char* record)> fn) const {
  std::unique_ptr<rocksdb_iterator_t, void (*)(rocksdb_iterator_t*)> it(
      api_.create_iterator(db_, database_->reads()), api_.iter_destroy);
  // A copy, so the record is aligned for its 64-bit id and floats.
  std::unique_ptr<uint64_t[]> aligned(new uint64_t[(record_bytes_ + 7) / 8]);
  char* record = reinterpret_cast<char*>(aligned.get());
  const Key first = tessera::KeyOf(tier_, 0, 0);
  for (api_.iter_seek(it.get(), first.data(), first.size());
       api_.iter_valid(it.get()); api_.iter_next(it.get())) {
    size_t key_size = 0;
    size_t value_size = 0;
    const char* key = api_.iter_key(it.get(), &key_size);
    // Past this tier's range: another tier's rows.
    if (key_size >= 8 && std::memcmp(key, first.data(), 8) != 0) break;
    const char* value = api_.iter_value(it.get(), &value_size);
    if (key_size != kKeyBytes ||
        static_cast<int64_t>(value_size) != record_bytes_) {
      return absl::DataLossError(absl::StrCat(
          "disk tier ", directory(), ": a row of ", key_size, "-byte key and ",
          value_size, " bytes, not ", kKeyBytes, " and ", record_bytes_));
    }
    const int64_t id = IdOf(key);
    std::memcpy(record, value, record_bytes_);
    fn(id, record);
  }
  char* error = nullptr;
  api_.iter_get_error(it.get(), &error);
  return FromRocks(api_, error, directory(), "cannot read");
}

}  // namespace tessera
