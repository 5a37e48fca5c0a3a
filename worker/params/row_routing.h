// Where the rows of a model's served embedding tables are: which shard of
// which parameter server holds each row. No calls: the row exchange
// (row_exchange.h) routes a step's rows here once and sends them.
//
// A table is one of two kinds (VariablePlacement.hash_table):
//  - fixed vocabulary [vocab_size, dim], split by the partitioner in the div
//    layout: ShardLayout::Locate (partitioners/shard_layout.h) routes a row;
//  - growing (hash) table [0, dim], one shard per parameter server:
//    HashShardOf (partitioners/hash_routing.h) routes a row.
//
// Thread safety: immutable after Create; Route may run concurrently.

#ifndef TESSERA_WORKER_PARAMS_ROW_ROUTING_H_
#define TESSERA_WORKER_PARAMS_ROW_ROUTING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "google/protobuf/repeated_field.h"
#include "partitioners/shard_layout.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// The rows of one shard in a step, and all a call to its server names
// them with: the shard, a row's floats and the precisions rows are pulled
// and gradients pushed in (VariablePlacement). `name` views the
// RowRouting's, which must outlive it.
struct ShardRows {
  int table = 0;
  int shard = 0;
  absl::string_view name;
  int64_t dim = 0;
  RowPrecision precision = ROW_FP32;
  RowPrecision gradient_precision = ROW_FP32;
  // The row ids, and each one's index in the step's rows of its table.
  std::vector<int64_t> ids;
  std::vector<int64_t> positions;
};

// Where a step's rows go, complete: per parameter server, one ShardRows
// per shard of every table (a shard without rows too, for a sync push);
// per table, its name, a row's floats and how many rows were routed.
struct RowRoutes {
  struct Table {
    absl::string_view name;
    int64_t dim = 0;
    size_t rows = 0;
  };
  std::vector<std::vector<ShardRows>> per_ps;
  std::vector<Table> tables;
};

class RowRouting {
 public:
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

  // `tables` are the served tables, in order; each needs a placement of
  // the same shape: a fixed table's shards must tile its rows in the div
  // layout, a hash table needs at least one shard, every shard on one of
  // the `num_servers` parameter servers. InvalidArgument names the table
  // and what does not fit.
  static absl::StatusOr<RowRouting> Create(
      const std::vector<VariableDef>& tables,
      const google::protobuf::RepeatedPtrField<VariablePlacement>& placements,
      int num_servers);

  // Routes view this object's table and shard names: it is moved only
  // while no routes exist (out of Create), and never copied.
  RowRouting(RowRouting&&) = default;
  RowRouting& operator=(RowRouting&&) = default;
  RowRouting(const RowRouting&) = delete;
  RowRouting& operator=(const RowRouting&) = delete;

  int num_tables() const { return static_cast<int>(tables_.size()); }
  int num_servers() const { return num_servers_; }
  const Table& table(int t) const { return tables_[t]; }

  // Groups rows[t] (distinct row ids of table t) by parameter server and
  // shard into *routes. OutOfRange names a row id outside a fixed table;
  // InvalidArgument rows of another number of tables.
  absl::Status Route(absl::Span<const std::vector<int64_t>> rows,
                     RowRoutes* routes) const;

 private:
  RowRouting(std::vector<Table> tables, int num_servers)
      : tables_(std::move(tables)), num_servers_(num_servers) {}

  std::vector<Table> tables_;
  int num_servers_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_ROW_ROUTING_H_
