// Flatten and Reshape: row-major data keeps its order, so both are a copy.
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class ReshapeLayerImpl final : public Layer {
 public:
  explicit ReshapeLayerImpl(const LayerSpec& spec)
      : size_(NumElements(spec.output)) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    ctx.backend->CopyOnDevice(inputs[0], output,
                              ctx.batch * size_ * sizeof(float));
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    if (dinputs[0] == nullptr) return;
    ctx.backend->CopyOnDevice(doutput, dinputs[0],
                              ctx.batch * size_ * sizeof(float));
  }

 private:
  const int64_t size_;
};

}  // namespace

std::unique_ptr<Layer> NewReshapeLayer(const LayerSpec& spec) {
  return std::make_unique<ReshapeLayerImpl>(spec);
}

}  // namespace tessera
