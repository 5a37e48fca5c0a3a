// Reading a Keras model's compile config: its loss and its optimizer.
// Errors are InvalidArgument naming the loss or optimizer and what
// Tessera lacks.
#ifndef TESSERA_TOOLS_KERAS_KERAS_COMPILE_H_
#define TESSERA_TOOLS_KERAS_KERAS_COMPILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "proto/job.pb.h"

namespace tessera {
namespace keras {

struct LossSpec {
  std::string name;  // Keras' function name, e.g. "binary_crossentropy"
  bool from_logits = false;
};

// The loss `j` of output `output`: one of the four Tessera trains, averaged
// over the batch, without label smoothing or an ignored class.
absl::StatusOr<LossSpec> ParseLoss(const nlohmann::json& j,
                                   const std::string& output);

// The optimizer `j` with Keras' defaults for what it leaves unset: SGD
// (with momentum and Nesterov), Adam, AdamW (Adam with weight decay),
// Adagrad or Ftrl; its learning rate a number or one of the schedules
// ExponentialDecay, PiecewiseConstantDecay, CosineDecay (with warm-up) and
// PolynomialDecay (OptimizerConfig.schedule, mapped as proto/job.proto
// says); weight_decay; clipvalue, clipnorm or global_clipnorm
// (OptimizerConfig.clipping); and dense table updates
// (TABLE_UPDATES_DENSE), as Keras steps an Embedding. Refused by name:
// other optimizers and schedules, a moving average (use_ema), loss
// scaling and gradient accumulation.
absl::StatusOr<OptimizerConfig> ParseOptimizer(const nlohmann::json& j);

}  // namespace keras
}  // namespace tessera

#endif  // TESSERA_TOOLS_KERAS_KERAS_COMPILE_H_
