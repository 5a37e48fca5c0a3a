#include "ps_server/row_disk_store.h"

#include <rocksdb/c.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "ps_server/rocksdb_library.h"

namespace tessera {

class RowDiskMemory {
 public:
  explicit RowDiskMemory(int64_t bytes) : bytes_(bytes) {}
  ~RowDiskMemory() {
    if (cache_ != nullptr) api_->cache_destroy(cache_);
  }

  // The shared cache, made by the first tier to open (when RocksDB is
  // loaded); the tiers' table options share it.
  rocksdb_cache_t* Cache(const RocksDbApi& api) {
    absl::MutexLock lock(&mu_);
    if (cache_ == nullptr) {
      api_ = &api;
      // Memtables take the other half, outside the cache (see the header).
      cache_ = api.cache_create_lru(
          static_cast<size_t>(std::max<int64_t>(bytes_ / 2, 1 << 20)));
    }
    return cache_;
  }
  // One memtable of one tier; below 1 MiB a tier would flush (and
  // compact) all the time.
  int64_t write_buffer_bytes() const {
    return std::clamp<int64_t>(bytes_ / 4, 1 << 20, 16 << 20);
  }

 private:
  const int64_t bytes_;
  absl::Mutex mu_;
  const RocksDbApi* api_ ABSL_GUARDED_BY(mu_) = nullptr;
  rocksdb_cache_t* cache_ ABSL_GUARDED_BY(mu_) = nullptr;
};

std::shared_ptr<RowDiskMemory> NewRowDiskMemory(int64_t bytes) {
  return std::make_shared<RowDiskMemory>(bytes);
}

namespace {

// Keys are the id's 8 bytes, little-endian as in memory: only equality
// matters, and a fixed width keeps RocksDB's index small.
std::string KeyOf(int64_t id) {
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

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

// Caller destroys the options.
rocksdb_options_t* TierOptions(const RocksDbApi& api, RowDiskMemory& memory) {
  rocksdb_options_t* options = api.options_create();
  api.set_create_if_missing(options, 1);
  api.set_error_if_exists(options, 1);
  // The tier exists to save memory: its blocks live in the server's
  // shared cache. Bloom filters make a lookup of a row that was never
  // spilled (every new row) rarely read a block; they and the block
  // indexes stay out of the cache, pinned with their files (about 1.3
  // bytes per row on disk), as a filter evicted by blocks would turn
  // every lookup into reads.
  api.set_write_buffer_size(options,
                            static_cast<size_t>(memory.write_buffer_bytes()));
  api.set_max_write_buffer_number(options, 2);
  api.set_max_open_files(options, 256);
  // Rows are floats: compression would cost time and save little.
  api.set_compression(options, rocksdb_no_compression);
  rocksdb_block_based_table_options_t* table = api.table_options_create();
  api.set_block_cache(table, memory.Cache(api));
  api.set_filter_policy(table, api.filterpolicy_create_bloom(10));
  api.set_cache_index_and_filter_blocks(table, 0);
  api.set_block_based_table_factory(options, table);  // copies `table`
  api.table_options_destroy(table);
  return options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RowDiskStore>> RowDiskStore::Open(
    const std::string& directory, int64_t record_bytes,
    std::shared_ptr<RowDiskMemory> memory) {
  if (record_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk tier ", directory,
                     ": record_bytes must be > 0, got ", record_bytes));
  }
  absl::StatusOr<const RocksDbApi*> api = LoadRocksDb();
  if (!api.ok()) return api.status();
  std::error_code error;
  std::filesystem::remove_all(directory, error);
  if (!error) std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("disk tier ", directory,
                     ": cannot empty or make the folder: ", error.message()));
  }
  if (memory == nullptr) memory = NewRowDiskMemory(16 << 20);
  rocksdb_options_t* options = TierOptions(**api, *memory);
  char* open_error = nullptr;
  rocksdb_t* db = (*api)->open(options, directory.c_str(), &open_error);
  (*api)->options_destroy(options);
  if (absl::Status s = FromRocks(**api, open_error, directory, "cannot open");
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<RowDiskStore>(
      new RowDiskStore(**api, directory, record_bytes, std::move(memory), db));
}

RowDiskStore::RowDiskStore(const RocksDbApi& api, std::string directory,
                           int64_t record_bytes,
                           std::shared_ptr<RowDiskMemory> memory, rocksdb_t* db)
    : api_(api),
      directory_(std::move(directory)),
      record_bytes_(record_bytes),
      memory_(std::move(memory)),
      db_(db),
      reads_(api.readoptions_create()),
      writes_(api.writeoptions_create()) {
  // The tier is a cache rebuilt from the checkpoint after a crash.
  api_.writeoptions_disable_wal(writes_, 1);
}

RowDiskStore::~RowDiskStore() {
  api_.close(db_);
  api_.readoptions_destroy(reads_);
  api_.writeoptions_destroy(writes_);
  std::error_code error;
  std::filesystem::remove_all(directory_, error);
  if (error) {
    LOG(WARNING) << "disk tier " << directory_
                 << ": cannot remove the folder: " << error.message();
  }
}

int64_t RowDiskStore::disk_bytes() const {
  uint64_t bytes = 0;
  api_.property_int(db_, "rocksdb.total-sst-files-size", &bytes);
  return static_cast<int64_t>(bytes);
}

absl::Status RowDiskStore::Write(absl::Span<const int64_t> ids,
                                 absl::Span<const char* const> records,
                                 bool deletes) {
  rocksdb_writebatch_t* batch = api_.writebatch_create();
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string key = KeyOf(ids[i]);
    if (deletes) {
      api_.writebatch_delete(batch, key.data(), key.size());
    } else {
      api_.writebatch_put(batch, key.data(), key.size(), records[i],
                          static_cast<size_t>(record_bytes_));
    }
  }
  char* error = nullptr;
  api_.write(db_, writes_, batch, &error);
  api_.writebatch_destroy(batch);
  return FromRocks(api_, error, directory_, "cannot write");
}

absl::Status RowDiskStore::Put(absl::Span<const int64_t> ids,
                               absl::Span<const char* const> records) {
  if (ids.size() != records.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk tier ", directory_, ": ", ids.size(), " ids and ",
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
        absl::StrCat("disk tier ", directory_, ": ", ids.size(), " ids and ",
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
  const std::string key = KeyOf(id);
  char* error = nullptr;
  rocksdb_pinnableslice_t* value =
      api_.get_pinned(db_, reads_, key.data(), key.size(), &error);
  if (absl::Status status = FromRocks(api_, error, directory_, "cannot read");
      !status.ok()) {
    if (value != nullptr) api_.pinnableslice_destroy(value);
    return status;
  }
  if (value == nullptr) return false;  // not found
  size_t size = 0;
  const char* data = api_.pinnableslice_value(value, &size);
  if (static_cast<int64_t>(size) != record_bytes_) {
    api_.pinnableslice_destroy(value);
    return absl::DataLossError(absl::StrCat("disk tier ", directory_, ": row ",
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
      api_.create_iterator(db_, reads_), api_.iter_destroy);
  // A copy, so the record is aligned for its 64-bit id and floats.
  std::unique_ptr<uint64_t[]> aligned(new uint64_t[(record_bytes_ + 7) / 8]);
  char* record = reinterpret_cast<char*>(aligned.get());
  for (api_.iter_seek_to_first(it.get()); api_.iter_valid(it.get());
       api_.iter_next(it.get())) {
    size_t key_size = 0;
    size_t value_size = 0;
    const char* key = api_.iter_key(it.get(), &key_size);
    const char* value = api_.iter_value(it.get(), &value_size);
    if (key_size != sizeof(int64_t) ||
        static_cast<int64_t>(value_size) != record_bytes_) {
      return absl::DataLossError(absl::StrCat(
          "disk tier ", directory_, ": a row of ", key_size, "-byte key and ",
          value_size, " bytes, not 8 and ", record_bytes_));
    }
    int64_t id;
    std::memcpy(&id, key, sizeof(id));
    std::memcpy(record, value, record_bytes_);
    fn(id, record);
  }
  char* error = nullptr;
  api_.iter_get_error(it.get(), &error);
  return FromRocks(api_, error, directory_, "cannot read");
}

}  // namespace tessera
