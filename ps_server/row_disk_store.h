// The disk tier of a growing table (tessera_ps --row_memory_budget): the
// records of rows moved out of memory, keyed by row id, in RocksDB, which
// is loaded from the node when the first tier opens
// (ps_server/rocksdb_library.h).
#ifndef TESSERA_PS_SERVER_ROW_DISK_STORE_H_
#define TESSERA_PS_SERVER_ROW_DISK_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

// RocksDB's C API handles (rocksdb/c.h).
struct rocksdb_t;
struct rocksdb_readoptions_t;
struct rocksdb_writeoptions_t;

namespace tessera {

struct RocksDbApi;

// The memory the disk tiers of one server share: RocksDB's block cache,
// half of `bytes` (at least 1 MiB), beside each tier's memtables (two of
// bytes/4 within [1 MiB, 16 MiB]: RocksDB's C API has no write buffer
// manager to charge them to the cache), so one tier stays within about
// `bytes`, plus their Bloom filters and block indexes, about 1.3 bytes per
// row on disk. Made when the first tier opens. Opaque; thread-safe.
class RowDiskMemory;
std::shared_ptr<RowDiskMemory> NewRowDiskMemory(int64_t bytes);

// Rows held on disk: each an id and its record, opaque bytes of one fixed
// size (a table's record: header, values in the table's precision and
// optimizer slots, so they move together and come back bit for bit).
//
// A cache of the server's state, never state of its own: Open empties the
// folder first (what a killed server left there is discarded, and the
// job's checkpoint restores the rows), writes skip RocksDB's log (nothing
// here must survive a crash), and the destructor removes the folder.
// Checkpoints read the rows out (ForEach) like the rows in memory.
//
// Thread safety: all methods may be called concurrently; the caller keeps
// an id in one place at a time (in memory or here) and ForEach's view
// consistent by holding the table still.
class RowDiskStore {
 public:
  // Opens an empty store of `record_bytes` records in `directory`, made
  // (with its parents) or emptied, using `memory` (null: 16 MiB of its
  // own). Errors name the folder; Unavailable when RocksDB's library
  // cannot be loaded.
  static absl::StatusOr<std::unique_ptr<RowDiskStore>> Open(
      const std::string& directory, int64_t record_bytes,
      std::shared_ptr<RowDiskMemory> memory = nullptr);
  ~RowDiskStore();
  RowDiskStore(const RowDiskStore&) = delete;
  RowDiskStore& operator=(const RowDiskStore&) = delete;

  const std::string& directory() const { return directory_; }
  int64_t record_bytes() const { return record_bytes_; }
  // Rows held.
  int64_t rows() const { return rows_.load(std::memory_order_relaxed); }
  // Bytes of the store's files on disk.
  int64_t disk_bytes() const;

  // Writes the rows `ids`, record i at records[i] (record_bytes each), in
  // one batch: all of them or, on error, none. REQUIRES: no id is held.
  absl::Status Put(absl::Span<const int64_t> ids,
                   absl::Span<const char* const> records);
  // Moves row `id` out: copies its record to `record` and deletes it here.
  // false when the row is not held (nothing changed).
  absl::StatusOr<bool> Take(int64_t id, char* record);
  // Copies row `id`'s record to `record` and keeps it; false when absent.
  absl::StatusOr<bool> Get(int64_t id, char* record) const;
  // Deletes rows. REQUIRES: every id is held.
  absl::Status Delete(absl::Span<const int64_t> ids);
  // Replaces the records of rows. REQUIRES: every id is held.
  absl::Status Overwrite(absl::Span<const int64_t> ids,
                         absl::Span<const char* const> records);

  // Calls `fn` with every row held, in id-byte order, from one snapshot.
  // The record is valid during the call only.
  absl::Status ForEach(
      absl::FunctionRef<void(int64_t id, const char* record)> fn) const;

 private:
  RowDiskStore(const RocksDbApi& api, std::string directory,
               int64_t record_bytes, std::shared_ptr<RowDiskMemory> memory,
               rocksdb_t* db);
  absl::Status Write(absl::Span<const int64_t> ids,
                     absl::Span<const char* const> records, bool deletes);

  const RocksDbApi& api_;
  const std::string directory_;
  const int64_t record_bytes_;
  const std::shared_ptr<RowDiskMemory> memory_;  // outlives db_
  rocksdb_t* const db_;
  rocksdb_readoptions_t* const reads_;
  rocksdb_writeoptions_t* const writes_;
  std::atomic<int64_t> rows_{0};
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_ROW_DISK_STORE_H_
