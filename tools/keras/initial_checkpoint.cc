#include "tools/keras/initial_checkpoint.h"

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/model/layer_kinds.h"
#include "common/model/model_graph.h"
#include "common/model/variable_optimizer.h"
#include "common/model_spec.h"
#include "ps_server/embedded/embedded_shards.h"

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
  EmbeddedShards shards;
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
    absl::StatusOr<int> added = shards.Add(v, VariableOptimizer(job, v));
    if (!added.ok()) return added.status();
    if (absl::Status s = shards.SetValues(*added, it->second->values);
        !s.ok()) {
      return s;
    }
  }
  // As a coordinator's first checkpoint: step 0, epoch 1 not begun.
  return shards.SaveCheckpoint(job, root, 0, 1);
}

}  // namespace tessera
