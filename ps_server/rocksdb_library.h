// RocksDB, loaded with dlopen the first time a disk tier opens
// (tessera_ps --row_memory_budget), rather than linked: like the CUDA
// libraries (docs/bundle.md), it is the node's, so a portable bundle does
// not carry it (12.9 MB and its compressors), and a server without the
// disk tier starts without it. Calls go through RocksDB's C API
// (rocksdb/c.h), whose functions keep their names and signatures across
// releases, so any installed soname serves.
//
// Contract:
//  - LoadRocksDb loads the first of kRocksDbSonames that dlopen finds,
//    once per process; later calls return the same table, or the same
//    error.
//  - Unavailable when no library is found (the error says which package
//    to install and why each name failed) or one of its functions is
//    missing (naming it).
//  - Thread safety: LoadRocksDb may be called from any thread.

#ifndef TESSERA_PS_SERVER_ROCKSDB_LIBRARY_H_
#define TESSERA_PS_SERVER_ROCKSDB_LIBRARY_H_

#include <rocksdb/c.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

// The RocksDB C functions the disk tier calls.
struct RocksDbApi {
  decltype(&rocksdb_open) open = nullptr;
  decltype(&rocksdb_close) close = nullptr;
  decltype(&rocksdb_free) free = nullptr;
  decltype(&rocksdb_write) write = nullptr;
  decltype(&rocksdb_get_pinned) get_pinned = nullptr;
  decltype(&rocksdb_pinnableslice_value) pinnableslice_value = nullptr;
  decltype(&rocksdb_pinnableslice_destroy) pinnableslice_destroy = nullptr;
  decltype(&rocksdb_property_int) property_int = nullptr;
  decltype(&rocksdb_writebatch_create) writebatch_create = nullptr;
  decltype(&rocksdb_writebatch_destroy) writebatch_destroy = nullptr;
  decltype(&rocksdb_writebatch_put) writebatch_put = nullptr;
  decltype(&rocksdb_writebatch_delete) writebatch_delete = nullptr;
  decltype(&rocksdb_writebatch_delete_range) writebatch_delete_range = nullptr;
  decltype(&rocksdb_create_iterator) create_iterator = nullptr;
  decltype(&rocksdb_iter_destroy) iter_destroy = nullptr;
  decltype(&rocksdb_iter_seek_to_first) iter_seek_to_first = nullptr;
  decltype(&rocksdb_iter_seek) iter_seek = nullptr;
  decltype(&rocksdb_iter_valid) iter_valid = nullptr;
  decltype(&rocksdb_iter_next) iter_next = nullptr;
  decltype(&rocksdb_iter_key) iter_key = nullptr;
  decltype(&rocksdb_iter_value) iter_value = nullptr;
  decltype(&rocksdb_iter_get_error) iter_get_error = nullptr;
  decltype(&rocksdb_options_create) options_create = nullptr;
  decltype(&rocksdb_options_destroy) options_destroy = nullptr;
  decltype(&rocksdb_options_set_create_if_missing) set_create_if_missing =
      nullptr;
  decltype(&rocksdb_options_set_error_if_exists) set_error_if_exists = nullptr;
  decltype(&rocksdb_options_set_write_buffer_size) set_write_buffer_size =
      nullptr;
  decltype(&rocksdb_options_set_max_write_buffer_number)
      set_max_write_buffer_number = nullptr;
  decltype(&rocksdb_options_set_max_open_files) set_max_open_files = nullptr;
  decltype(&rocksdb_options_set_compression) set_compression = nullptr;
  decltype(&rocksdb_options_set_optimize_filters_for_hits)
      set_optimize_filters_for_hits = nullptr;
  decltype(&rocksdb_options_set_memtable_prefix_bloom_size_ratio)
      set_memtable_prefix_bloom_size_ratio = nullptr;
  // Optional (null where the library lacks it): RocksDB 6.11's C API has
  // no setter for it.
  decltype(&rocksdb_options_set_memtable_whole_key_filtering)
      set_memtable_whole_key_filtering = nullptr;
  decltype(&rocksdb_options_set_compaction_style) set_compaction_style =
      nullptr;
  decltype(&rocksdb_options_set_level0_file_num_compaction_trigger)
      set_level0_file_num_compaction_trigger = nullptr;
  decltype(&rocksdb_options_set_level0_slowdown_writes_trigger)
      set_level0_slowdown_writes_trigger = nullptr;
  decltype(&rocksdb_options_set_level0_stop_writes_trigger)
      set_level0_stop_writes_trigger = nullptr;
  decltype(&rocksdb_options_set_block_based_table_factory)
      set_block_based_table_factory = nullptr;
  decltype(&rocksdb_block_based_options_create) table_options_create = nullptr;
  decltype(&rocksdb_block_based_options_destroy) table_options_destroy =
      nullptr;
  decltype(&rocksdb_block_based_options_set_block_cache) set_block_cache =
      nullptr;
  decltype(&rocksdb_block_based_options_set_filter_policy) set_filter_policy =
      nullptr;
  decltype(&rocksdb_block_based_options_set_cache_index_and_filter_blocks)
      set_cache_index_and_filter_blocks = nullptr;
  decltype(&rocksdb_filterpolicy_create_bloom) filterpolicy_create_bloom =
      nullptr;
  decltype(&rocksdb_cache_create_lru) cache_create_lru = nullptr;
  decltype(&rocksdb_cache_destroy) cache_destroy = nullptr;
  decltype(&rocksdb_readoptions_create) readoptions_create = nullptr;
  decltype(&rocksdb_readoptions_destroy) readoptions_destroy = nullptr;
  decltype(&rocksdb_readoptions_set_fill_cache) readoptions_set_fill_cache =
      nullptr;
  decltype(&rocksdb_writeoptions_create) writeoptions_create = nullptr;
  decltype(&rocksdb_writeoptions_destroy) writeoptions_destroy = nullptr;
  decltype(&rocksdb_writeoptions_disable_WAL) writeoptions_disable_wal =
      nullptr;
  std::string soname;  // the name that loaded
};

// The names tried, in order: the development link, then the sonames of
// the releases distributions ship (Debian 12: librocksdb.so.7.8).
const std::vector<std::string>& RocksDbSonames();

// Loads the first of `sonames` found. Not cached: each call dlopens
// again (the library stays loaded). For tests and LoadRocksDb.
absl::StatusOr<std::unique_ptr<RocksDbApi>> LoadRocksDbFrom(
    const std::vector<std::string>& sonames);

absl::StatusOr<const RocksDbApi*> LoadRocksDb();

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_ROCKSDB_LIBRARY_H_
