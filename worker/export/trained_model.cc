#include "worker/export/trained_model.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checkpoint_dir.h"
#include "common/model/model_presets.h"
#include "common/model/variable_optimizer.h"
#include "common/model_spec.h"
#include "ps_server/shard_checkpoint.h"
#include "ps_server/shard_store.h"
#include "worker/export/model_file.h"

namespace tessera {
namespace {

// The one shard holding all of `v`, as the coordinator defines it for one
// parameter server: restoring onto it gathers every saved shard.
// The checkpoint `path` names: itself when it is a checkpoint folder, else
// the newest valid one under it.
absl::StatusOr<ValidCheckpoint> FindCheckpoint(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  const std::string base =
      slash == std::string::npos ? path : path.substr(slash + 1);
  int64_t step = 0;
  if (ParseCheckpointDirName(base, &step)) {
    const std::string root = slash == std::string::npos
                                 ? "."
                                 : path.substr(0, std::max<size_t>(slash, 1));
    CheckpointDir dir(root);
    CheckpointRef ref;
    ref.step = step;
    ref.path = path;
    ref.has_manifest = true;
    absl::StatusOr<CheckpointManifest> manifest = dir.Validate(ref);
    if (!manifest.ok()) return manifest.status();
    return ValidCheckpoint{step, path, *std::move(manifest)};
  }
  return CheckpointDir(path).LatestValid();
}

// Copies the restored shard of `v` out of `store`.
absl::Status TakeValue(const VariableDef& v, ShardStore& store,
                       TrainedVariable* out) {
  const std::string shard = absl::StrCat(v.name, "/part_0");
  out->name = v.name;
  out->shape = v.shape;
  out->table = v.sparse;
  out->vocab_size = v.sparse ? v.shape[0] : 0;
  for (const StoredShard& stored : store.List()) {
    if (stored.def().name() != shard || stored.table == nullptr) continue;
    const int64_t dim = stored.table->row_elements();
    std::vector<std::pair<int64_t, const float*>> rows;
    absl::Status s = stored.table->VisitRows(
        [&](const HashTable::Rows& view) -> absl::Status {
          view.ForEach([&](const HashRowRef& row) {
            rows.emplace_back(row.id, row.values);
          });
          // Sorted by id, so an export is the same file however the rows
          // were laid out in memory.
          std::sort(rows.begin(), rows.end());
          out->ids.reserve(rows.size());
          out->values.resize(rows.size() * dim);
          for (size_t r = 0; r < rows.size(); ++r) {
            out->ids.push_back(rows[r].first);
            std::copy_n(rows[r].second, dim, out->values.data() + r * dim);
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

absl::StatusOr<TrainedModel> LoadTrainedModel(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) {
    return ReadModelFile(path);
  }
  absl::StatusOr<ValidCheckpoint> checkpoint = FindCheckpoint(path);
  if (!checkpoint.ok()) return checkpoint.status();
  TrainedModel m;
  m.checkpoint = checkpoint->path;
  m.global_step = checkpoint->manifest.global_step();
  m.epoch = checkpoint->manifest.epoch();
  m.job = checkpoint->manifest.job();
  absl::StatusOr<ModelDef> model = JobModel(m.job);
  if (!model.ok()) return model.status();
  m.model = *std::move(model);
  absl::StatusOr<ModelGraph> graph =
      BuildModelGraph(m.model, m.job.schedule().seed());
  if (!graph.ok()) return graph.status();
  m.graph = *std::move(graph);

  ShardStore store;
  for (const VariableDef& v : m.graph.variables) {
    CreateShardsRequest request;
    *request.add_shards() = WholeShardOf(v);
    *request.mutable_optimizer() = VariableOptimizer(m.job, v);
    CreateShardsResponse response;
    if (absl::Status s = store.Create(request, &response); !s.ok()) return s;
  }
  RestoreShardsResponse restored;
  if (absl::Status s = RestoreShardCheckpoint(
          checkpoint->manifest, checkpoint->path, &store, &restored);
      !s.ok()) {
    return s;
  }
  for (const VariableDef& v : m.graph.variables) {
    TrainedVariable value;
    if (absl::Status s = TakeValue(v, store, &value); !s.ok()) return s;
    m.index[v.name] = static_cast<int>(m.variables.size());
    m.variables.push_back(std::move(value));
  }
  return m;
}

}  // namespace tessera
