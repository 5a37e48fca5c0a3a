// A trained Tessera model as a Keras 3 model: a Functional config with the
// description's names, the job's loss, metrics and optimizer as the
// compile config, and the trained values as Keras' weights.
#ifndef TESSERA_TOOLS_KERAS_KERAS_EXPORT_H_
#define TESSERA_TOOLS_KERAS_KERAS_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/export/trained_model.h"
#include "tools/keras/keras_archive.h"

namespace tessera {

struct KerasExport {
  nlohmann::json config;                   // config.json
  std::vector<KerasLayerWeights> weights;  // model.weights.h5, in order
  std::string model_name;
  std::string optimizer_name;
};

// Converts `model`. The fused loss's activation (softmax, sigmoid) is put
// back on the layer that feeds it, so Keras' predict returns what
// tessera_predict does, and the compile config's loss reads probabilities
// (from_logits=False); a loss marked from_logits (a Keras model that output
// logits) keeps its logits and from_logits=True, so Keras' predict returns
// what the original Keras model's did. FailedPrecondition names a layer Keras
// cannot express without custom objects (DotInteraction, Cross, FmOrder2, an
// embedding bag of several fields, a shared or growing table, a sum over a
// bag of several ids). The optimizer goes back with its schedule, weight
// decay (Adam's as AdamW) and clipping; Unimplemented names what Keras'
// schedules and optimizers lack (a hold before the decay, a warm-up before
// a decay other than cosine, row-wise Adagrad).
absl::StatusOr<KerasExport> ExportKerasModel(const TrainedModel& model);

}  // namespace tessera

#endif  // TESSERA_TOOLS_KERAS_KERAS_EXPORT_H_
