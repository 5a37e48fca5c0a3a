#include "ps_server/rocksdb_library.h"

#include <dlfcn.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera {
namespace {

template <typename F>
void Resolve(void* library, const char* symbol, F* out, std::string* error) {
  *out = reinterpret_cast<F>(dlsym(library, symbol));
  if (*out == nullptr && error->empty()) {
    const char* why = dlerror();
    *error = absl::StrCat("RocksDB has no ", symbol, ": ",
                          why != nullptr ? why : "(no reason given)");
  }
}

absl::Status ResolveAll(void* lib, RocksDbApi& api) {
  std::string error;
  Resolve(lib, "rocksdb_open", &api.open, &error);
  Resolve(lib, "rocksdb_close", &api.close, &error);
  Resolve(lib, "rocksdb_free", &api.free, &error);
  Resolve(lib, "rocksdb_write", &api.write, &error);
  Resolve(lib, "rocksdb_get_pinned", &api.get_pinned, &error);
  Resolve(lib, "rocksdb_pinnableslice_value", &api.pinnableslice_value, &error);
  Resolve(lib, "rocksdb_pinnableslice_destroy", &api.pinnableslice_destroy,
          &error);
  Resolve(lib, "rocksdb_property_int", &api.property_int, &error);
  Resolve(lib, "rocksdb_writebatch_create", &api.writebatch_create, &error);
  Resolve(lib, "rocksdb_writebatch_destroy", &api.writebatch_destroy, &error);
  Resolve(lib, "rocksdb_writebatch_put", &api.writebatch_put, &error);
  Resolve(lib, "rocksdb_writebatch_delete", &api.writebatch_delete, &error);
  Resolve(lib, "rocksdb_writebatch_delete_range", &api.writebatch_delete_range,
          &error);
  Resolve(lib, "rocksdb_create_iterator", &api.create_iterator, &error);
  Resolve(lib, "rocksdb_iter_destroy", &api.iter_destroy, &error);
  Resolve(lib, "rocksdb_iter_seek_to_first", &api.iter_seek_to_first, &error);
  Resolve(lib, "rocksdb_iter_seek", &api.iter_seek, &error);
  Resolve(lib, "rocksdb_iter_valid", &api.iter_valid, &error);
  Resolve(lib, "rocksdb_iter_next", &api.iter_next, &error);
  Resolve(lib, "rocksdb_iter_key", &api.iter_key, &error);
  Resolve(lib, "rocksdb_iter_value", &api.iter_value, &error);
  Resolve(lib, "rocksdb_iter_get_error", &api.iter_get_error, &error);
  Resolve(lib, "rocksdb_options_create", &api.options_create, &error);
  Resolve(lib, "rocksdb_options_destroy", &api.options_destroy, &error);
  Resolve(lib, "rocksdb_options_set_create_if_missing",
          &api.set_create_if_missing, &error);
  Resolve(lib, "rocksdb_options_set_error_if_exists", &api.set_error_if_exists,
          &error);
  Resolve(lib, "rocksdb_options_set_write_buffer_size",
          &api.set_write_buffer_size, &error);
  Resolve(lib, "rocksdb_options_set_max_write_buffer_number",
          &api.set_max_write_buffer_number, &error);
  Resolve(lib, "rocksdb_options_set_max_open_files", &api.set_max_open_files,
          &error);
  Resolve(lib, "rocksdb_options_set_compression", &api.set_compression, &error);
  Resolve(lib, "rocksdb_options_set_optimize_filters_for_hits",
          &api.set_optimize_filters_for_hits, &error);
  Resolve(lib, "rocksdb_options_set_memtable_prefix_bloom_size_ratio",
          &api.set_memtable_prefix_bloom_size_ratio, &error);
  api.set_memtable_whole_key_filtering =
      reinterpret_cast<decltype(api.set_memtable_whole_key_filtering)>(
          dlsym(lib, "rocksdb_options_set_memtable_whole_key_filtering"));
  Resolve(lib, "rocksdb_options_set_compaction_style",
          &api.set_compaction_style, &error);
  Resolve(lib, "rocksdb_options_set_level0_file_num_compaction_trigger",
          &api.set_level0_file_num_compaction_trigger, &error);
  Resolve(lib, "rocksdb_options_set_level0_slowdown_writes_trigger",
          &api.set_level0_slowdown_writes_trigger, &error);
  Resolve(lib, "rocksdb_options_set_level0_stop_writes_trigger",
          &api.set_level0_stop_writes_trigger, &error);
  Resolve(lib, "rocksdb_options_set_block_based_table_factory",
          &api.set_block_based_table_factory, &error);
  Resolve(lib, "rocksdb_block_based_options_create", &api.table_options_create,
          &error);
  Resolve(lib, "rocksdb_block_based_options_destroy",
          &api.table_options_destroy, &error);
  Resolve(lib, "rocksdb_block_based_options_set_block_cache",
          &api.set_block_cache, &error);
  Resolve(lib, "rocksdb_block_based_options_set_filter_policy",
          &api.set_filter_policy, &error);
  Resolve(lib, "rocksdb_block_based_options_set_cache_index_and_filter_blocks",
          &api.set_cache_index_and_filter_blocks, &error);
  Resolve(lib, "rocksdb_filterpolicy_create_bloom",
          &api.filterpolicy_create_bloom, &error);
  Resolve(lib, "rocksdb_cache_create_lru", &api.cache_create_lru, &error);
  Resolve(lib, "rocksdb_cache_destroy", &api.cache_destroy, &error);
  Resolve(lib, "rocksdb_readoptions_create", &api.readoptions_create, &error);
  Resolve(lib, "rocksdb_readoptions_destroy", &api.readoptions_destroy, &error);
  Resolve(lib, "rocksdb_readoptions_set_fill_cache",
          &api.readoptions_set_fill_cache, &error);
  Resolve(lib, "rocksdb_writeoptions_create", &api.writeoptions_create, &error);
  Resolve(lib, "rocksdb_writeoptions_destroy", &api.writeoptions_destroy,
          &error);
  Resolve(lib, "rocksdb_writeoptions_disable_WAL",
          &api.writeoptions_disable_wal, &error);
  if (!error.empty()) {
    return absl::UnavailableError(absl::StrCat(api.soname, ": ", error));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& RocksDbSonames() {
  static const std::vector<std::string>* const names =
      new std::vector<std::string>{
          "librocksdb.so",     "librocksdb.so.9.10", "librocksdb.so.9",
          "librocksdb.so.8.9", "librocksdb.so.8",    "librocksdb.so.7.8",
          "librocksdb.so.7",   "librocksdb.so.6.11", "librocksdb.so.6"};
  return *names;
}

absl::StatusOr<std::unique_ptr<RocksDbApi>> LoadRocksDbFrom(
    const std::vector<std::string>& sonames) {
  std::vector<std::string> failures;
  for (const std::string& name : sonames) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      failures.push_back(why != nullptr ? why : name + ": (no reason given)");
      continue;
    }
    auto api = std::make_unique<RocksDbApi>();
    api->soname = name;
    if (absl::Status s = ResolveAll(lib, *api); !s.ok()) return s;
    return api;
  }
  return absl::UnavailableError(absl::StrCat(
      "the disk tier (--row_memory_budget) needs RocksDB's shared library "
      "librocksdb.so: install librocksdb7.8 (Debian 12) or your "
      "distribution's librocksdb; it was not found: ",
      failures.empty() ? "no names to try" : absl::StrJoin(failures, "; ")));
}

absl::StatusOr<const RocksDbApi*> LoadRocksDb() {
  // A function-local static: loaded once, by the first caller, safely
  // against concurrent first calls.
  static const absl::StatusOr<std::unique_ptr<RocksDbApi>>* const loaded =
      new absl::StatusOr<std::unique_ptr<RocksDbApi>>(
          LoadRocksDbFrom(RocksDbSonames()));
  if (!loaded->ok()) return loaded->status();
  return loaded->value().get();
}

}  // namespace tessera
