#include "worker/keras/initial_checkpoint.h"

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/model/layer_kinds.h"
#include "common/model/model_graph.h"
#include "common/model/variable_optimizer.h"
#include "common/model_spec.h"
#include "ps_server/shard_checkpoint.h"
#include "ps_server/shard_store.h"

namespace tessera {

absl::StatusOr<std::string> WriteInitialCheckpoint(
    const JobConfig& job,
    const std::vector<std::pair<std::string, KerasArray>>& values,
    const std::string& root) {
  absl::StatusOr<ModelGraph> graph =
      BuildModelGraph(job.model_def(), job.schedule().seed());
  if (!graph.ok()) return graph.status();
  absl::flat_hash_map<std::string, const KerasArray*> by_name;
  for (const auto& [name, array] : values) by_name[name] = &array;
  ShardStore store;
  for (const VariableDef& v : graph->variables) {
    auto it = by_name.find(v.name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no value for variable ", v.name));
    }
    if (it->second->shape != v.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable ", v.name, ": value of shape ",
                       ShapeString(it->second->shape), ", the model's ",
                       ShapeString(v.shape)));
    }
    if (v.sparse && v.shape[0] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", v.name, " grows with the data: it has no initial rows"));
    }
    CreateShardsRequest request;
    *request.add_shards() = WholeShardOf(v);
    *request.mutable_optimizer() = VariableOptimizer(job, v);
    CreateShardsResponse response;
    if (absl::Status s = store.Create(request, &response); !s.ok()) return s;
    absl::StatusOr<std::shared_ptr<Shard>> shard =
        store.Find(request.shards(0).name());
    if (!shard.ok()) return shard.status();
    ShardState state = (*shard)->CopyState();
    state.values = it->second->values;
    if (absl::Status s = (*shard)->RestoreState(std::move(state)); !s.ok()) {
      return s;
    }
  }
  CheckpointDir dir(root);
  absl::StatusOr<std::string> folder = dir.Prepare(0);
  if (!folder.ok()) return folder.status();
  SaveShardsResponse saved;
  if (absl::Status s = SaveShardCheckpoint(store, *folder, 0, &saved);
      !s.ok()) {
    return s;
  }
  // As a coordinator's first checkpoint: step 0, epoch 1 not begun.
  CheckpointManifest manifest;
  manifest.set_global_step(0);
  manifest.set_epoch(1);
  manifest.set_num_ps(1);
  *manifest.mutable_optimizer() = job.optimizer();
  *manifest.mutable_job() = job;
  manifest.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  *manifest.add_files() = saved.file();
  for (CheckpointVariable& v : *saved.mutable_variables()) {
    *v.mutable_partitioner() = job.partitioner();
    *manifest.add_variables() = std::move(v);
  }
  if (absl::Status s = dir.Commit(manifest); !s.ok()) return s;
  return *folder;
}

}  // namespace tessera
