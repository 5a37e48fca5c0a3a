// A trained model's metrics on a set of examples, as training prints them
// for its test set: loss, accuracy, and AUC and log loss for a click
// model. tessera_evaluator computes them for each new checkpoint.
#ifndef TESSERA_TOOLS_EVALUATE_MODEL_EVALUATION_H_
#define TESSERA_TOOLS_EVALUATE_MODEL_EVALUATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "data/example_set.h"
#include "tools/export/trained_model.h"
#include "worker/backend/backend.h"

namespace tessera {

struct ModelMetrics {
  int64_t examples = 0;
  double loss = 0, accuracy = 0;
  // Models with a BINARY label and one sigmoid output; -1 otherwise.
  double auc = -1, log_loss = -1;
  double seconds = 0;
};

// Evaluates `model` on every example of `examples`, `batch` at a time, on
// `backend`.
absl::StatusOr<ModelMetrics> EvaluateModel(const TrainedModel& model,
                                           const ExampleSet& examples,
                                           int64_t batch, Backend* backend);

}  // namespace tessera

#endif  // TESSERA_TOOLS_EVALUATE_MODEL_EVALUATION_H_
