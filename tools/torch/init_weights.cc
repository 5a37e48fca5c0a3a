#include "tools/torch/init_weights.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/io/safetensors.h"
#include "common/model/model_graph.h"
#include "tools/keras/initial_checkpoint.h"

namespace tessera {

absl::StatusOr<std::vector<VariableValues>> ReadInitWeights(
    const JobConfig& job, const std::string& path) {
  absl::StatusOr<Safetensors> file = ReadSafetensorsFile(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<ModelGraph> graph =
      BuildModelGraph(job.model_def(), job.schedule().seed());
  if (!graph.ok()) return graph.status();
  absl::StatusOr<std::vector<VariableValues>> values =
      VariablesFromStateDict(*graph, *file);
  if (!values.ok()) {
    return absl::Status(values.status().code(),
                        absl::StrCat(path, ": ", values.status().message()));
  }
  return values;
}

std::string InitWeightsCheckpointRoot(const std::string& path) {
  return absl::StrCat(path, ".checkpoint");
}

absl::StatusOr<std::string> WriteInitWeightsCheckpoint(
    const JobConfig& job, const std::vector<VariableValues>& values,
    const std::string& root) {
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot replace ", root, ": ", ec.message()));
  }
  std::vector<std::pair<std::string, KerasArray>> arrays;
  arrays.reserve(values.size());
  for (const VariableValues& v : values) {
    arrays.push_back({v.name, KerasArray{v.shape, v.values}});
  }
  return WriteInitialCheckpoint(job, arrays, root);
}

}  // namespace tessera
