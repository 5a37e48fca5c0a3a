// A worker's view of a model's embedding tables: which parameter server
// holds which row, and the sparse pull and push of the rows one batch uses.
//
// A table is one of two kinds (VariablePlacement.hash_table):
//  - fixed vocabulary [vocab_size, dim], split by the partitioner in the div
//    layout: a feature id maps to row id mod vocab_size, and
//    ShardLayout::Locate (partitioners/shard_layout.h) routes the row;
//  - growing (hash) table [0, dim], one shard per parameter server: the row
//    id is the feature id itself, and HashShardOf (partitioners/
//    hash_routing.h) routes it.
// A step localizes each table's ids (Localize: map, then deduplicate), pulls
// the distinct rows from all parameter servers in parallel, keeping the
// routes (which shard of which server holds each row), and pushes one
// summed gradient row per distinct row along the same routes.
//
// Thread safety: one call at a time (the calls share the threads that
// reach the servers); Routes belong to the caller.

#ifndef TESSERA_WORKER_PARAMS_SPARSE_PARAMETERS_H_
#define TESSERA_WORKER_PARAMS_SPARSE_PARAMETERS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "google/protobuf/repeated_field.h"
#include "partitioners/shard_layout.h"
#include "proto/worker_service.pb.h"
#include "ps_server/client/ps_client.h"
#include "worker/params/parallel_calls.h"

namespace tessera {

class SparseParameters {
 public:
  // `tables` are the model's sparse variables, in order; each needs a
  // placement of the same shape: a fixed table's shards must tile its rows
  // in the div layout, a hash table needs at least one shard. `clients[k]`
  // talks to ps task k and must outlive this object.
  static absl::StatusOr<std::unique_ptr<SparseParameters>> Create(
      const std::vector<VariableDef>& tables,
      const google::protobuf::RepeatedPtrField<VariablePlacement>& placements,
      std::vector<PsClient*> clients);

  // One PullRows or PushRows call: the rows of one shard.
  struct Request {
    int table = 0;
    int shard = 0;
    std::vector<int64_t> ids;
    std::vector<int64_t> positions;  // of each id in rows[table]
    std::vector<float> buffer;       // pulled values or gathered gradients
  };
  // Where a step's rows go: per parameter server, one request per shard of
  // every table (a shard without rows too, for a sync push), and the rows
  // of each table.
  struct Routes {
    std::vector<std::vector<Request>> per_ps;
    std::vector<size_t> rows;
  };

  int num_tables() const { return static_cast<int>(tables_.size()); }
  int64_t dim(int table) const { return tables_[table].dim; }

  // Maps a batch's feature ids of `table` to row ids (fixed tables: id mod
  // vocab_size, so a negative or too large id still lands on a row) and
  // deduplicates them: *unique gets the distinct row ids, ascending, and
  // *positions, per entry of `ids`, the index of its row in *unique.
  void Localize(int table, absl::Span<const int64_t> ids,
                std::vector<int64_t>* unique,
                std::vector<int64_t>* positions) const;

  // Pulls rows[t] (distinct row ids of table t, as Localize makes them) of
  // every table into values[t], which must hold [rows[t].size(), dim]
  // floats (the caller's buffer: pinned host memory on a GPU worker, so the
  // copy to the device runs asynchronously), all parameter servers in
  // parallel. OutOfRange names a row id outside a fixed table;
  // InvalidArgument a buffer of the wrong size; a parameter server's
  // refusal is returned as it is. In sync mode (`sync_step` set) the rows
  // after every step before `sync_step`.
  // With `routes`, the routes of the rows are kept there, for PushAlong.
  absl::Status Pull(absl::Span<const std::vector<int64_t>> rows,
                    absl::Span<const absl::Span<float>> values,
                    std::optional<int64_t> sync_step = std::nullopt,
                    Routes* routes = nullptr);

  // Pushes grads[t] ([rows[t].size(), dim]: one summed gradient per
  // distinct row) of every table, all parameter servers in parallel. Errors
  // as Pull's; InvalidArgument for a gradient of the wrong size. With
  // `sync`, as a part of a sync step, which every shard of every table
  // must hear of: a shard none of the rows are on gets a push with none.
  absl::Status Push(absl::Span<const std::vector<int64_t>> rows,
                    absl::Span<const std::vector<float>> grads,
                    const SyncPush* sync = nullptr);
  // As Push, for the rows `routes` holds (Pull's or Route's), without
  // routing them again.
  absl::Status PushAlong(Routes* routes,
                         absl::Span<const std::vector<float>> grads,
                         const SyncPush* sync = nullptr);

  // Groups the rows by parameter server and shard into *routes.
  // OutOfRange names a row id outside a fixed table.
  absl::Status Route(absl::Span<const std::vector<int64_t>> rows,
                     Routes* routes) const;

 private:
  struct Table {
    std::string name;
    int64_t dim = 0;
    bool hash = false;
    std::optional<ShardLayout> layout;  // fixed tables
    std::vector<std::string> shard_names;
    std::vector<int> shard_ps;
    // What rows are pulled in and gradients pushed in (VariablePlacement).
    RowPrecision precision = ROW_FP32;
    RowPrecision gradient_precision = ROW_FP32;
  };
  SparseParameters(std::vector<Table> tables, std::vector<PsClient*> clients)
      : tables_(std::move(tables)),
        clients_(std::move(clients)),
        calls_(static_cast<int>(clients_.size())) {}

  // Runs call(k, requests of ps k) for every ps with a request that
  // `any_shard` or one with rows, in parallel.
  absl::Status ForEachServer(
      Routes* routes, bool any_shard,
      const std::function<absl::Status(PsClient*, std::vector<Request>&)>&
          call);

  const std::vector<Table> tables_;
  const std::vector<PsClient*> clients_;
  ParallelCalls calls_;  // one call per ps at once
};

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_SPARSE_PARAMETERS_H_
