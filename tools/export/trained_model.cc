#include "tools/export/trained_model.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/model/model_presets.h"
#include "common/model/variable_optimizer.h"
#include "common/model_spec.h"
#include "ps_server/restore/variable_restore.h"
#include "tools/export/model_file.h"

namespace tessera {
namespace {

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

  std::vector<VariableToRestore> wanted;
  for (const VariableDef& v : m.graph.variables) {
    wanted.push_back({v, VariableOptimizer(m.job, v)});
  }
  absl::StatusOr<std::vector<RestoredVariable>> restored =
      RestoreVariables(checkpoint->manifest, checkpoint->path, wanted);
  if (!restored.ok()) return restored.status();
  for (size_t i = 0; i < wanted.size(); ++i) {
    const VariableDef& v = wanted[i].variable;
    RestoredVariable& r = (*restored)[i];
    TrainedVariable value;
    value.name = std::move(r.name);
    value.shape = std::move(r.shape);
    value.values = std::move(r.values);
    value.ids = std::move(r.ids);
    value.table = v.sparse;
    value.vocab_size = v.sparse ? v.shape[0] : 0;
    m.index[v.name] = static_cast<int>(m.variables.size());
    m.variables.push_back(std::move(value));
  }
  return m;
}

}  // namespace tessera
