#ifndef TESSERA_COMMON_MODEL_SPEC_H_
#define TESSERA_COMMON_MODEL_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"

namespace tessera {

// A model variable as the coordinator creates it on the parameter servers.
struct VariableDef {
  std::string name;
  std::vector<int64_t> shape;
  Initializer initializer;
  // An embedding table: read and updated by rows (the ids of a batch), never
  // whole. shape is [vocab_size, dim]; vocab_size 0 means the table has no
  // fixed size and grows a row on the first access of an id.
  bool sparse = false;
  // A fixed update rule instead of the job's optimizer (BatchNorm's moving
  // statistics); unset for every trained variable.
  std::optional<OptimizerConfig> update_rule;
};

// Checks a model description; errors name the bad field.
absl::Status ValidateModelConfig(const ModelConfig& model);

// The variables of `model`, in a fixed order that the worker's model uses
// too. This is the single description of a model's parameters: the
// coordinator creates them from it and the worker reads them back by name.
// Dense layer i has "dense_{i}/kernel" [in, out] (Glorot uniform, as Keras)
// and "dense_{i}/bias" [out] (zeros).
//
// kind "mlp": the dense layers input_dim -> hidden_units... -> num_classes.
// kind "ctr": first "embedding_{f}" [vocab_size, embedding_dim] for each
// field f (sparse, uniform in [-0.05, 0.05) as Keras' Embedding), then the
// dense layers num_fields * embedding_dim + num_dense -> hidden_units... ->
// 1 (one logit).
absl::StatusOr<std::vector<VariableDef>> ModelVariables(
    const ModelConfig& model, uint64_t seed);

// The one shard that holds all of `v`, as a process training or loading a
// model alone (no parameter servers) keeps it: a growing table becomes a
// hash shard of one.
ShardDef WholeShardOf(const VariableDef& v);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_SPEC_H_
