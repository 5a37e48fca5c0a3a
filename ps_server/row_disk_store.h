// The disk tier of a growing table (tessera_ps --row_memory_budget): the
// records of rows moved out of memory, keyed by row id, in RocksDB, which
// is loaded from the node when the first tier opens
// (ps_server/rocksdb_library.h).
#ifndef TESSERA_PS_SERVER_ROW_DISK_STORE_H_
#define TESSERA_PS_SERVER_ROW_DISK_STORE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

// RocksDB's C API handle (rocksdb/c.h).
struct rocksdb_t;

namespace tessera {

struct RocksDbApi;

// The one RocksDB database of a server's disk tiers, in `directory`: every
// tier (every spilling table shard) is a key range of it, so the server's
// tiers share one pair of memtables, one block cache and one flush and
// compaction stream, and its memory is bounded once, not per table:
// `memory_bytes` in all: 1 MiB of block cache (reads do not fill it) and
// two memtables of the rest (each (memory_bytes - 1 MiB) / 2, at least
// 1 MiB), plus its Bloom filters and block indexes, about 1.3 bytes per
// row on disk.
// Opened (RocksDB loaded, the folder emptied) when the first tier opens;
// the folder is removed when the last tier and the owner let go of it.
// Opaque; thread-safe.
class RowDiskDatabase;
std::shared_ptr<RowDiskDatabase> NewRowDiskDatabase(std::string directory,
                                                    int64_t memory_bytes);
// The memory `database` holds now: its memtables, cached blocks, and its
// files' indexes and filters (those as of at most 0.1 s ago; 0 before it
// opens).
int64_t RowDiskMemoryBytes(RowDiskDatabase& database);

// Rows held on disk: each an id and its record, opaque bytes of one fixed
// size (a table's record: header, values in the table's precision and
// optimizer slots, so they move together and come back bit for bit).
//
// A cache of the server's state, never state of its own: the database's
// folder is emptied when it opens (what a killed server left there is
// discarded, and the job's checkpoint restores the rows), writes skip
// RocksDB's log (nothing here must survive a crash), and the destructor
// deletes the store's rows (and a database of its own, its folder).
// Checkpoints read the rows out (ForEach) like the rows in memory.
//
// Thread safety: all methods may be called concurrently; the caller keeps
// an id in one place at a time (in memory or here) and ForEach's view
// consistent by holding the table still.
class RowDiskStore {
 public:
  // The group of a row: rows are kept in (group, id) order. A caller that
  // writes and deletes rows in batches of one group (a table's stripe)
  // makes each batch's keys neighbours in RocksDB's memtable, whose skip
  // list then inserts each key next to the last instead of searching
  // from the top (bench/results/tables.md). Must be a pure function.
  using GroupOf = uint32_t (*)(int64_t id);

  // Opens an empty store of `record_bytes` records in `database` (a key
  // range of its own), grouped by `group_of` (null: one group). Errors
  // name the database's folder; Unavailable when RocksDB's library cannot
  // be loaded.
  static absl::StatusOr<std::unique_ptr<RowDiskStore>> Open(
      std::shared_ptr<RowDiskDatabase> database, int64_t record_bytes,
      GroupOf group_of = nullptr);
  ~RowDiskStore();
  RowDiskStore(const RowDiskStore&) = delete;
  RowDiskStore& operator=(const RowDiskStore&) = delete;

  // The database's folder.
  const std::string& directory() const;
  int64_t record_bytes() const { return record_bytes_; }
  // Rows held.
  int64_t rows() const { return rows_.load(std::memory_order_relaxed); }

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

  // Calls `fn` with every row held, in (group, id-byte) order, from one
  // snapshot. The record is valid during the call only.
  absl::Status ForEach(
      absl::FunctionRef<void(int64_t id, const char* record)> fn) const;

 private:
  RowDiskStore(std::shared_ptr<RowDiskDatabase> database, uint64_t tier,
               int64_t record_bytes, GroupOf group_of);
  // The RocksDB key of row `id`: tier, group, id.
  std::array<char, 20> KeyOf(int64_t id) const;
  absl::Status Write(absl::Span<const int64_t> ids,
                     absl::Span<const char* const> records, bool deletes);

  const std::shared_ptr<RowDiskDatabase> database_;
  const RocksDbApi& api_;
  rocksdb_t* const db_;  // database_'s
  const uint64_t tier_;  // the first 8 bytes of this store's keys
  const int64_t record_bytes_;
  const GroupOf group_of_;  // null: every row in group 0
  std::atomic<int64_t> rows_{0};
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_ROW_DISK_STORE_H_
