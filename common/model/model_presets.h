// The two models Tessera trained before models were descriptions, as
// descriptions: `--model=mlp --hidden_units=...` and `--model=ctr` stay
// shorthands for these, and the job files deploy/jobs/mlp_fashion_mnist
// and ctr_click.textproto write the same models out.

#ifndef TESSERA_COMMON_MODEL_MODEL_PRESETS_H_
#define TESSERA_COMMON_MODEL_MODEL_PRESETS_H_

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"

namespace tessera {

// The description of preset `config` (ModelConfig.kind "mlp" or "ctr"),
// with the variable names, initializers and seed streams the compiled
// models had, so a job keeps its checkpoints and its numbers:
//
//  mlp: input "image" [input_dim] -> dense_0 (ReLU) -> dropout_0 -> ... ->
//       dense_L (num_classes logits) -> softmax cross-entropy.
//  ctr: sparse inputs "C1".."C<F>" (one table "embedding_<f>" each, sum or
//       mean bags of embedding_dim) and, with num_dense > 0, dense input
//       "dense" [num_dense] -> dense_0 reading [bags..., dense] (ReLU) ->
//       dropout_0 -> ... -> dense_L (one logit) -> sigmoid cross-entropy.
//
// InvalidArgument names a bad field of `config`.
absl::StatusOr<ModelDef> PresetModel(const ModelConfig& config);

// The model `job` trains: its model_def, or else its preset's description.
absl::StatusOr<ModelDef> JobModel(const JobConfig& job);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_MODEL_PRESETS_H_
