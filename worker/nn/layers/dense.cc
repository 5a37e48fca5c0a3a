// Dense: y = activation(concat(inputs) * kernel + bias). Several inputs
// are multiplied block by block with their rows of the kernel, so the
// concatenation is never built.
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class DenseLayerImpl final : public Layer {
 public:
  DenseLayerImpl(const LayerSpec& spec, Backend* backend)
      : activation_(spec.def->dense().activation()),
        units_(spec.output[0]),
        kernel_(spec.params.values[0]),
        dkernel_(spec.params.grads[0]),
        bias_(spec.params.values.size() > 1 ? spec.params.values[1] : nullptr),
        dbias_(spec.params.grads.size() > 1 ? spec.params.grads[1] : nullptr),
        backend_(backend) {
    for (const TensorFacts& in : spec.inputs) widths_.push_back(in.shape[0]);
  }

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    int64_t row = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ctx.backend->Gemm(false, false, ctx.batch, units_, widths_[i], 1.0f,
                        inputs[i], kernel_ + row * units_, i == 0 ? 0.0f : 1.0f,
                        output);
      row += widths_[i];
    }
    if (bias_ != nullptr) {
      ctx.backend->AddBias(bias_, ctx.batch, units_, output);
    }
    ActivationForward(ctx.backend, activation_, ctx.batch, units_, output);
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    const float* dz = doutput;
    if (activation_ != LINEAR) {
      const int64_t n = ctx.batch * units_;
      if (scratch_.size() < n) scratch_ = DeviceArray<float>(backend_, n);
      ActivationBackward(ctx.backend, activation_, ctx.batch, units_, output,
                         doutput, scratch_.data());
      dz = scratch_.data();
    }
    int64_t row = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ctx.backend->Gemm(true, false, widths_[i], units_, ctx.batch, 1.0f,
                        inputs[i], dz, 0.0f, dkernel_ + row * units_);
      row += widths_[i];
    }
    if (dbias_ != nullptr) {
      ctx.backend->BiasGrad(dz, ctx.batch, units_, dbias_);
    }
    row = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (dinputs[i] != nullptr) {
        ctx.backend->Gemm(false, true, ctx.batch, widths_[i], units_, 1.0f, dz,
                          kernel_ + row * units_, 0.0f, dinputs[i]);
      }
      row += widths_[i];
    }
  }

 private:
  const Activation activation_;
  const int64_t units_;
  std::vector<int64_t> widths_;
  float* const kernel_;
  float* const dkernel_;
  float* const bias_;
  float* const dbias_;
  Backend* const backend_;
  DeviceArray<float> scratch_;  // the gradient before the activation
};

}  // namespace

std::unique_ptr<Layer> NewDenseLayer(const LayerSpec& spec, Backend* backend) {
  return std::make_unique<DenseLayerImpl>(spec, backend);
}

}  // namespace tessera
