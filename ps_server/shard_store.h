#ifndef TESSERA_PS_SERVER_SHARD_STORE_H_
#define TESSERA_PS_SERVER_SHARD_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/optimizer/optimizer.h"
#include "proto/ps_service.pb.h"
#include "ps_server/hash_table.h"
#include "ps_server/row_memory_budget.h"
#include "ps_server/row_table.h"
#include "ps_server/shard.h"

namespace tessera {

// One shard of a store, of either kind (exactly one of shard and table is
// set), for walking every shard (checkpoints).
struct StoredShard {
  std::shared_ptr<Shard> shard;      // a fixed row range, or null
  std::shared_ptr<HashTable> table;  // a growing table, or null
  const ShardDef& def() const { return shard ? shard->def() : table->def(); }
};

struct ShardStoreOptions {
  // The server's budget for rows in memory (tessera_ps
  // --row_memory_budget), or null for none. Fixed shards are charged their
  // size when made; growing tables move the rows beyond it to disk.
  std::shared_ptr<RowMemoryBudget> row_budget;
};

// The shards one parameter server holds, by name: fixed row ranges of
// variables (Shard) and shards of growing tables (HashTable, for the
// definitions with hash_table set).
//
// Thread safety: all methods may be called concurrently. Shards are handed
// out as shared_ptr so a request keeps its shard alive while it works.
class ShardStore {
 public:
  explicit ShardStore(ShardStoreOptions options = {})
      : options_(std::move(options)) {}
  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  // Creates every shard of the request, or none: a request with any bad
  // definition changes nothing. A shard that exists with an identical
  // definition counts as existing, with a different one is an error.
  absl::Status Create(const CreateShardsRequest& request,
                      CreateShardsResponse* response);

  // NotFound naming the shard when it does not exist; FailedPrecondition
  // when it is a hash table, which has no dense value.
  absl::StatusOr<std::shared_ptr<Shard>> Find(const std::string& name) const;

  // The shard as rows by id, for either kind; NotFound when it does not
  // exist.
  absl::StatusOr<std::shared_ptr<RowTable>> FindRows(
      const std::string& name) const;

  // The serialized OptimizerConfig the shard was made with; NotFound when
  // it does not exist.
  absl::StatusOr<std::string> OptimizerOf(const std::string& name) const;

  // Every shard held, in name order.
  std::vector<StoredShard> List() const;

  int64_t num_shards() const;
  int64_t resident_bytes() const;
  // Of resident_bytes, what the rows present take (RowTable::used_bytes).
  int64_t used_bytes() const;

 private:
  // Every shard's rows, for the byte counts (taken under the lock, summed
  // outside it).
  std::vector<std::shared_ptr<RowTable>> Tables() const;

  struct Entry {
    std::shared_ptr<Shard> shard;  // null for a hash table
    std::shared_ptr<RowTable> rows;
    std::string optimizer;  // serialized OptimizerConfig it was made with
    std::shared_ptr<HashTable> table;  // `rows` again for a hash table
  };

  const ShardStoreOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> shards_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Optimizer>> optimizers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_SHARD_STORE_H_
