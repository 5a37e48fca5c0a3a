#include "ps_server/row_disk_store.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"

namespace tessera {

class RowDiskMemory {
 public:
  explicit RowDiskMemory(int64_t bytes)
      : cache_(rocksdb::NewLRUCache(static_cast<size_t>(bytes))),
        // Memtables take about half, charged to the same cache; below
        // 1 MiB each a tier would flush (and compact) all the time.
        write_buffers_(std::make_shared<rocksdb::WriteBufferManager>(
            static_cast<size_t>(std::max<int64_t>(bytes / 2, 2 << 20)),
            cache_)),
        write_buffer_bytes_(std::clamp<int64_t>(bytes / 4, 1 << 20, 16 << 20)) {
  }

  const std::shared_ptr<rocksdb::Cache> cache_;
  const std::shared_ptr<rocksdb::WriteBufferManager> write_buffers_;
  const int64_t write_buffer_bytes_;  // one memtable of one tier
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

absl::Status FromRocks(const rocksdb::Status& status,
                       const std::string& directory, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("disk tier ", directory, ": ", what,
                                          ": ", status.ToString()));
}

rocksdb::Options TierOptions(const RowDiskMemory& memory) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  // The tier exists to save memory: its memtables and blocks live in the
  // server's shared cache. Bloom filters make a lookup of a row that was
  // never spilled (every new row) rarely read a block; they and the block
  // indexes stay out of the cache, pinned with their files (about 1.3
  // bytes per row on disk), as a filter evicted by blocks would turn
  // every lookup into reads.
  options.write_buffer_size = static_cast<size_t>(memory.write_buffer_bytes_);
  options.max_write_buffer_number = 2;
  options.write_buffer_manager = memory.write_buffers_;
  options.max_open_files = 256;
  // Rows are floats: compression would cost time and save little.
  options.compression = rocksdb::kNoCompression;
  // Nothing here outlives the server: closing flushes nothing.
  options.avoid_flush_during_shutdown = true;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = memory.cache_;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.cache_index_and_filter_blocks = false;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

rocksdb::WriteOptions TierWrites() {
  rocksdb::WriteOptions writes;
  // The tier is a cache rebuilt from the checkpoint after a crash.
  writes.disableWAL = true;
  return writes;
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
  std::error_code error;
  std::filesystem::remove_all(directory, error);
  if (!error) std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("disk tier ", directory,
                     ": cannot empty or make the folder: ", error.message()));
  }
  if (memory == nullptr) memory = NewRowDiskMemory(16 << 20);
  rocksdb::DB* db = nullptr;
  if (absl::Status s =
          FromRocks(rocksdb::DB::Open(TierOptions(*memory), directory, &db),
                    directory, "cannot open");
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<RowDiskStore>(
      new RowDiskStore(directory, record_bytes, std::move(memory),
                       std::unique_ptr<rocksdb::DB>(db)));
}

RowDiskStore::RowDiskStore(std::string directory, int64_t record_bytes,
                           std::shared_ptr<RowDiskMemory> memory,
                           std::unique_ptr<rocksdb::DB> db)
    : directory_(std::move(directory)),
      record_bytes_(record_bytes),
      memory_(std::move(memory)),
      db_(std::move(db)) {}

RowDiskStore::~RowDiskStore() {
  if (rocksdb::Status s = db_->Close(); !s.ok()) {
    LOG(WARNING) << "disk tier " << directory_ << ": " << s.ToString();
  }
  db_.reset();
  std::error_code error;
  std::filesystem::remove_all(directory_, error);
  if (error) {
    LOG(WARNING) << "disk tier " << directory_
                 << ": cannot remove the folder: " << error.message();
  }
}

int64_t RowDiskStore::disk_bytes() const {
  uint64_t bytes = 0;
  db_->GetIntProperty("rocksdb.total-sst-files-size", &bytes);
  return static_cast<int64_t>(bytes);
}

absl::Status RowDiskStore::Write(absl::Span<const int64_t> ids,
                                 absl::Span<const char* const> records,
                                 bool deletes) {
  rocksdb::WriteBatch batch;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string key = KeyOf(ids[i]);
    if (deletes) {
      batch.Delete(key);
    } else {
      batch.Put(key, rocksdb::Slice(records[i], record_bytes_));
    }
  }
  return FromRocks(db_->Write(TierWrites(), &batch), directory_,
                   "cannot write");
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
  rocksdb::PinnableSlice value;
  const rocksdb::Status s = db_->Get(
      rocksdb::ReadOptions(), db_->DefaultColumnFamily(), KeyOf(id), &value);
  if (s.IsNotFound()) return false;
  if (absl::Status status = FromRocks(s, directory_, "cannot read");
      !status.ok()) {
    return status;
  }
  if (static_cast<int64_t>(value.size()) != record_bytes_) {
    return absl::DataLossError(absl::StrCat("disk tier ", directory_, ": row ",
                                            id, " has ", value.size(),
                                            " bytes, not ", record_bytes_));
  }
  std::memcpy(record, value.data(), record_bytes_);
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
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions()));
  // A copy, so the record is aligned for its 64-bit id and floats.
  std::unique_ptr<uint64_t[]> aligned(new uint64_t[(record_bytes_ + 7) / 8]);
  char* record = reinterpret_cast<char*>(aligned.get());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    const rocksdb::Slice value = it->value();
    if (key.size() != sizeof(int64_t) ||
        static_cast<int64_t>(value.size()) != record_bytes_) {
      return absl::DataLossError(absl::StrCat(
          "disk tier ", directory_, ": a row of ", key.size(), "-byte key and ",
          value.size(), " bytes, not 8 and ", record_bytes_));
    }
    int64_t id;
    std::memcpy(&id, key.data(), sizeof(id));
    std::memcpy(record, value.data(), record_bytes_);
    fn(id, record);
  }
  return FromRocks(it->status(), directory_, "cannot read");
}

}  // namespace tessera
