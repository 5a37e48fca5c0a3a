#include "ps_server/restore/variable_restore.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ps_server/shard_checkpoint.h"
#include "ps_server/shard_store.h"

namespace tessera {
namespace {

// Copies the restored whole shard of `v` out of `store`.
absl::Status TakeValue(const VariableDef& v, ShardStore& store,
                       RestoredVariable* out) {
  const std::string shard = WholeShardOf(v).name();
  out->name = v.name;
  out->shape = v.shape;
  for (const StoredShard& stored : store.List()) {
    if (stored.def().name() != shard || stored.table == nullptr) continue;
    const int64_t dim = stored.table->row_elements();
    // (id, where its values are in `seen`): a narrow table's row is
    // widened into a buffer that the next row reuses, so each is copied.
    std::vector<std::pair<int64_t, size_t>> rows;
    std::vector<float> seen;
    absl::Status s = stored.table->VisitRows(
        [&](const HashTable::Rows& view) -> absl::Status {
          view.ForEach([&](const HashRowRef& row) {
            rows.emplace_back(row.id, seen.size());
            seen.insert(seen.end(), row.values, row.values + dim);
          });
          // Sorted by id, so an export is the same file however the rows
          // were laid out in memory.
          std::sort(rows.begin(), rows.end());
          out->ids.reserve(rows.size());
          out->values.resize(rows.size() * dim);
          for (size_t r = 0; r < rows.size(); ++r) {
            out->ids.push_back(rows[r].first);
            std::copy_n(seen.data() + rows[r].second, dim,
                        out->values.data() + r * dim);
          }
          return absl::OkStatus();
        });
    out->shape = {static_cast<int64_t>(rows.size()), dim};
    return s;
  }
  absl::StatusOr<std::shared_ptr<Shard>> dense = store.Find(shard);
  if (!dense.ok()) return dense.status();
  out->values.resize((*dense)->num_elements());
  (*dense)->ReadBytes(0, (*dense)->byte_size(),
                      reinterpret_cast<char*>(out->values.data()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<RestoredVariable>> RestoreVariables(
    const CheckpointManifest& manifest, const std::string& directory,
    absl::Span<const VariableToRestore> variables) {
  ShardStore store;
  for (const VariableToRestore& v : variables) {
    CreateShardsRequest request;
    *request.add_shards() = WholeShardOf(v.variable);
    *request.mutable_optimizer() = v.optimizer;
    CreateShardsResponse response;
    if (absl::Status s = store.Create(request, &response); !s.ok()) return s;
  }
  RestoreShardsResponse restored;
  if (absl::Status s =
          RestoreShardCheckpoint(manifest, directory, &store, &restored);
      !s.ok()) {
    return s;
  }
  std::vector<RestoredVariable> out(variables.size());
  for (size_t i = 0; i < variables.size(); ++i) {
    if (absl::Status s = TakeValue(variables[i].variable, store, &out[i]);
        !s.ok()) {
      return s;
    }
  }
  return out;
}

}  // namespace tessera
