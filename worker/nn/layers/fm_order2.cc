// FmOrder2: the factorization machine's second-order term of the stacked
// feature vectors.
#include "worker/nn/layers/feature_stack.h"
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class FmOrder2LayerImpl final : public Layer {
 public:
  FmOrder2LayerImpl(const LayerSpec& spec, Backend* backend)
      : stack_(spec.inputs), backend_(backend) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    const int64_t n = ctx.batch * stack_.count() * stack_.dim();
    if (stacked_.size() < n) {
      stacked_ = DeviceArray<float>(backend_, n);
      dstacked_ = DeviceArray<float>(backend_, n);
    }
    stack_.Stack(ctx.backend, ctx.batch, inputs, stacked_.data());
    ctx.backend->FmOrder2Forward(ctx.batch, stack_.count(), stack_.dim(),
                                 stacked_.data(), output);
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    ctx.backend->FmOrder2Backward(ctx.batch, stack_.count(), stack_.dim(),
                                  stacked_.data(), doutput, dstacked_.data());
    stack_.Split(ctx.backend, ctx.batch, dstacked_.data(), dinputs);
  }

 private:
  const FeatureStack stack_;
  Backend* const backend_;
  DeviceArray<float> stacked_, dstacked_;
};

}  // namespace

std::unique_ptr<Layer> NewFmOrder2Layer(const LayerSpec& spec,
                                        Backend* backend) {
  return std::make_unique<FmOrder2LayerImpl>(spec, backend);
}

}  // namespace tessera
