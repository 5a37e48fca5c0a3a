// A trained model read straight from a checkpoint folder, with no cluster:
// the job it was trained by, its model graph, and every variable's value
// gathered from all the shards of all the parameter servers that saved it.
// tessera_export and tessera_predict start from it.
#ifndef TESSERA_TOOLS_EXPORT_TRAINED_MODEL_H_
#define TESSERA_TOOLS_EXPORT_TRAINED_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/model/model_graph.h"
#include "proto/checkpoint.pb.h"
#include "proto/job.pb.h"

namespace tessera {

// One variable's value, whole.
struct TrainedVariable {
  std::string name;
  std::vector<int64_t> shape;  // a growing table: [rows held, dim]
  std::vector<float> values;   // row-major
  // Embedding tables only.
  bool table = false;
  int64_t vocab_size = 0;    // 0: a growing (hashed) table
  std::vector<int64_t> ids;  // a growing table: the id of each row, ascending
};

struct TrainedModel {
  std::string checkpoint;  // the checkpoint folder read (<root>/ckpt-<step>)
  // Steps trained, each one batch on one worker, as the checkpoint's name
  // counts them (a lockstep mode's global step is one per worker).
  int64_t global_step = 0;
  // The data position: the epoch in progress when it was written, so the
  // job's final checkpoint has epoch > job.schedule().epochs().
  int epoch = 0;
  JobConfig job;
  ModelDef model;  // the job's model description
  ModelGraph graph;
  // In graph.variables order.
  std::vector<TrainedVariable> variables;
  absl::flat_hash_map<std::string, int> index;  // by name

  const TrainedVariable* Find(const std::string& name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &variables[it->second];
  }
};

// Reads the checkpoint at `path`: a checkpoint folder ("<root>/ckpt-
// 0000000120"), a root, whose newest valid checkpoint is taken, or a
// model file (tools/export/model_file.h). The
// checkpoint is verified and its variables restored exactly as a training
// job's restore does (common/checkpoint/checkpoint_dir.h, ps_server/
// shard_checkpoint.h), onto one shard per variable, so a missing, damaged
// or mismatched checkpoint gets the errors a restore gives. Memory at its
// peak: the values and optimizer slots the restore fills, plus the values
// copied out of them (what is returned).
absl::StatusOr<TrainedModel> LoadTrainedModel(const std::string& path);

}  // namespace tessera

#endif  // TESSERA_TOOLS_EXPORT_TRAINED_MODEL_H_
