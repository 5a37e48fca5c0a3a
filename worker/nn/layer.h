#ifndef TESSERA_WORKER_NN_LAYER_H_
#define TESSERA_WORKER_NN_LAYER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model/layer_kinds.h"
#include "proto/model.pb.h"
#include "worker/backend/backend.h"

namespace tessera {

// What one forward or backward pass of a layer needs beyond its tensors.
struct StepContext {
  Backend* backend = nullptr;
  int64_t batch = 0;
  bool training = false;
  uint64_t seed = 0;  // the step's seed; layers derive their own from it
};

// One layer of a graph, written once against the Backend ops so it runs on
// every device. Tensors are device arrays of `batch` examples of the shapes
// the model's graph inferred, row-major. A layer owns no activations of
// the graph; it may keep scratch buffers of its own.
//
// Thread safety: one pass at a time (the graph's).
class Layer {
 public:
  virtual ~Layer() = default;

  // Writes the output of `inputs`.
  virtual void Forward(const StepContext& ctx,
                       absl::Span<const float* const> inputs,
                       float* output) = 0;

  // Given the forward pass's inputs and output and the gradient of the loss
  // with respect to the output, writes (never adds to) the gradient of
  // every input whose dinputs entry is not null, and of every parameter.
  // REQUIRES: Forward ran last with the same inputs and context.
  virtual void Backward(const StepContext& ctx,
                        absl::Span<const float* const> inputs,
                        const float* output, const float* doutput,
                        absl::Span<float* const> dinputs) = 0;
};

// Device buffers of a layer's variables and their gradients, in
// LayerVariables order.
struct LayerParams {
  std::vector<float*> values;
  std::vector<float*> grads;
};

// What a layer is built from.
struct LayerSpec {
  const LayerDef* def = nullptr;  // defaults resolved
  std::vector<TensorFacts> inputs;
  Shape output;
  LayerParams params;
  // Dropout layers count among themselves in graph order, so each draws
  // its mask from its own stream of the step's seed.
  int dropout_index = 0;
};

// Builds the layer `spec` describes, or Unimplemented naming the kind the
// layer library does not run yet.
absl::StatusOr<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec,
                                                   Backend* backend);

}  // namespace tessera

#endif  // TESSERA_WORKER_NN_LAYER_H_
