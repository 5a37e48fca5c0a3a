// The layer translators: one Keras layer (Dense, Conv2D, MaxPooling2D,
// Activation, ReLU, Softmax, Dropout, BatchNormalization,
// LayerNormalization, Flatten, Reshape, Concatenate, Add, Multiply) as one
// Tessera layer, and where its saved weights go. The importer
// (keras_import.cc) walks the graph, handles inputs and Embedding (which
// becomes an embedding bag with the pooling after it), and checks the
// result's shapes.
#ifndef TESSERA_TOOLS_KERAS_KERAS_LAYERS_H_
#define TESSERA_TOOLS_KERAS_KERAS_LAYERS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/model/layer_kinds.h"
#include "proto/model.pb.h"
#include "tools/keras/keras_graph.h"

namespace tessera {
namespace keras {

// Where a Keras weight goes: vars[index] of Keras layer `layer` is
// Tessera variable `variable`.
struct WeightRef {
  std::string layer;
  int index = 0;
  std::string variable;
};

// Fills `layer` (its name and inputs already set) from Keras layer `n`,
// which reads tensors of `inputs`' facts, and appends where its weights go
// to `weights`. InvalidArgument naming the layer, its class and why for a
// class or option Tessera does not have.
absl::Status TranslateKerasLayer(const KerasNode& n,
                                 absl::Span<const TensorFacts> inputs,
                                 LayerDef* layer,
                                 std::vector<WeightRef>* weights);

}  // namespace keras
}  // namespace tessera

#endif  // TESSERA_TOOLS_KERAS_KERAS_LAYERS_H_
