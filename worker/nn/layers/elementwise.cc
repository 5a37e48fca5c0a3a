// Add and Multiply of inputs of one shape.
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class ElementwiseLayerImpl final : public Layer {
 public:
  ElementwiseLayerImpl(const LayerSpec& spec, bool multiply)
      : multiply_(multiply), size_(NumElements(spec.output)) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    const int64_t n = ctx.batch * size_;
    ctx.backend->CopyOnDevice(inputs[0], output, n * sizeof(float));
    for (size_t i = 1; i < inputs.size(); ++i) {
      if (multiply_) {
        ctx.backend->Mul(n, output, inputs[i], 0.0f, output);
      } else {
        ctx.backend->Axpby(n, 1.0f, inputs[i], 1.0f, output);
      }
    }
  }

  // Add passes the gradient to every input; Multiply scales it by the
  // product of the other inputs.
  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    const int64_t n = ctx.batch * size_;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (dinputs[i] == nullptr) continue;
      ctx.backend->CopyOnDevice(doutput, dinputs[i], n * sizeof(float));
      if (!multiply_) continue;
      for (size_t j = 0; j < inputs.size(); ++j) {
        if (j != i)
          ctx.backend->Mul(n, dinputs[i], inputs[j], 0.0f, dinputs[i]);
      }
    }
  }

 private:
  const bool multiply_;
  const int64_t size_;
};

}  // namespace

std::unique_ptr<Layer> NewElementwiseLayer(const LayerSpec& spec,
                                           bool multiply) {
  return std::make_unique<ElementwiseLayerImpl>(spec, multiply);
}

}  // namespace tessera
