// Dropout: inverted, in training only. The mask is a pure function of the
// step's seed and the element, so the backward pass draws it again instead
// of storing it.
#include "common/counter_rng.h"
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class DropoutLayerImpl final : public Layer {
 public:
  explicit DropoutLayerImpl(const LayerSpec& spec)
      : rate_(spec.def->dropout().rate()),
        index_(spec.dropout_index),
        size_(NumElements(spec.output)) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    const int64_t n = ctx.batch * size_;
    ctx.backend->CopyOnDevice(inputs[0], output, n * sizeof(float));
    if (ctx.training && rate_ > 0) {
      ctx.backend->Dropout(DeriveSeed(ctx.seed, index_), rate_, n, output);
    }
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    if (dinputs[0] == nullptr) return;
    const int64_t n = ctx.batch * size_;
    ctx.backend->CopyOnDevice(doutput, dinputs[0], n * sizeof(float));
    if (ctx.training && rate_ > 0) {
      ctx.backend->Dropout(DeriveSeed(ctx.seed, index_), rate_, n, dinputs[0]);
    }
  }

 private:
  const float rate_;
  const int index_;
  const int64_t size_;
};

}  // namespace

std::unique_ptr<Layer> NewDropoutLayer(const LayerSpec& spec) {
  return std::make_unique<DropoutLayerImpl>(spec);
}

}  // namespace tessera
