#include "worker/params/row_routing.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "partitioners/hash_routing.h"

namespace tessera {
namespace {

// The shards of `table` as `placement` puts them, checked against the div
// layout the workers route with (a placement made otherwise would send
// rows to shards that do not hold them).
absl::Status AddShards(const VariablePlacement& placement, int num_servers,
                       RowRouting::Table* table) {
  if (placement.shards_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", table->name, " has no shards"));
  }
  const int64_t vocab = placement.shape().dims(0);
  if (!table->hash) {
    absl::StatusOr<ShardLayout> layout =
        ShardLayout::Div(vocab, placement.shards_size());
    if (!layout.ok()) return layout.status();
    table->layout = *layout;
  }
  for (int i = 0; i < placement.shards_size(); ++i) {
    const ShardPlacement& shard = placement.shards(i);
    if (shard.ps_task() < 0 || shard.ps_task() >= num_servers) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", table->name, ": shard ", shard.name(),
                       " is on ps ", shard.ps_task(), " of ", num_servers));
    }
    if (!table->hash &&
        (table->layout->num_shards() != placement.shards_size() ||
         shard.row_offset() != table->layout->shard_offset(i) ||
         shard.rows() != table->layout->shard_rows(i))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", table->name, ": shard ", shard.name(), " holds rows [",
          shard.row_offset(), ", ", shard.row_offset() + shard.rows(),
          "), not the div layout's share of ", vocab, " rows over ",
          placement.shards_size(), " shards"));
    }
    table->shard_names.push_back(shard.name());
    table->shard_ps.push_back(shard.ps_task());
  }
  return absl::OkStatus();
}

absl::StatusOr<RowRouting::Table> TableOf(
    const VariableDef& var,
    const google::protobuf::RepeatedPtrField<VariablePlacement>& placements,
    int num_servers) {
  const VariablePlacement* placement = nullptr;
  for (const VariablePlacement& p : placements) {
    if (p.name() == var.name) placement = &p;
  }
  if (placement == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no placement for table ", var.name));
  }
  const std::vector<int64_t> shape(placement->shape().dims().begin(),
                                   placement->shape().dims().end());
  if (shape != var.shape || shape.size() != 2 || shape[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("wrong shape: table ", var.name, " is [",
                     absl::StrJoin(var.shape, ","), "] in the model but [",
                     absl::StrJoin(shape, ","), "] in the placement"));
  }
  RowRouting::Table table;
  table.name = var.name;
  table.dim = shape[1];
  table.hash = placement->hash_table();
  table.precision = placement->precision();
  table.gradient_precision = placement->gradient_precision();
  if (!RowPrecision_IsValid(table.precision) ||
      !RowPrecision_IsValid(table.gradient_precision)) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", var.name, ": precision ", table.precision,
                     " or gradient precision ", table.gradient_precision,
                     " is not one of ROW_FP32, ROW_FP16, ROW_BF16"));
  }
  if (table.hash != (shape[0] == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", var.name, " has ", shape[0], " rows but is placed as ",
        table.hash ? "a growing" : "a fixed", " table"));
  }
  if (absl::Status s = AddShards(*placement, num_servers, &table); !s.ok()) {
    return s;
  }
  return table;
}

}  // namespace

absl::StatusOr<RowRouting> RowRouting::Create(
    const std::vector<VariableDef>& tables,
    const google::protobuf::RepeatedPtrField<VariablePlacement>& placements,
    int num_servers) {
  std::vector<Table> out;
  for (const VariableDef& var : tables) {
    absl::StatusOr<Table> table = TableOf(var, placements, num_servers);
    if (!table.ok()) return table.status();
    out.push_back(*std::move(table));
  }
  return RowRouting(std::move(out), num_servers);
}

absl::Status RowRouting::Route(absl::Span<const std::vector<int64_t>> rows,
                               RowRoutes* routes) const {
  if (rows.size() != tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows of ", rows.size(), " tables given, the model has ",
                     tables_.size()));
  }
  routes->per_ps.assign(num_servers_, {});
  routes->tables.clear();
  for (size_t t = 0; t < tables_.size(); ++t) {
    const Table& table = tables_[t];
    routes->tables.push_back({table.name, table.dim, rows[t].size()});
    // Every shard's rows, in shard order: the index in per_ps[ps] of each.
    std::vector<int> entry_of;
    for (size_t s = 0; s < table.shard_names.size(); ++s) {
      std::vector<ShardRows>& on_ps = routes->per_ps[table.shard_ps[s]];
      entry_of.push_back(static_cast<int>(on_ps.size()));
      ShardRows& entry = on_ps.emplace_back();
      entry.table = static_cast<int>(t);
      entry.shard = static_cast<int>(s);
      entry.name = table.shard_names[s];
      entry.dim = table.dim;
      entry.precision = table.precision;
      entry.gradient_precision = table.gradient_precision;
    }
    for (size_t i = 0; i < rows[t].size(); ++i) {
      const int64_t id = rows[t][i];
      int shard;
      if (table.hash) {
        shard = HashShardOf(id, static_cast<int>(table.shard_names.size()));
      } else {
        absl::StatusOr<ShardRow> located = table.layout->Locate(id);
        if (!located.ok()) {
          return absl::OutOfRangeError(absl::StrCat(
              "table ", table.name, ": ", located.status().message()));
        }
        shard = located->shard;
      }
      ShardRows& entry = routes->per_ps[table.shard_ps[shard]][entry_of[shard]];
      entry.ids.push_back(id);
      entry.positions.push_back(static_cast<int64_t>(i));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
