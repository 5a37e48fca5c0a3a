// LayerNormalization over the last axis, with gamma and beta.
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class LayerNormLayerImpl final : public Layer {
 public:
  LayerNormLayerImpl(const LayerSpec& spec, Backend* backend)
      : epsilon_(spec.def->layer_norm().epsilon()),
        cols_(spec.output.back()),
        size_(NumElements(spec.output)),
        gamma_(spec.params.values[0]),
        beta_(spec.params.values[1]),
        dgamma_(spec.params.grads[0]),
        dbeta_(spec.params.grads[1]),
        backend_(backend) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    const int64_t rows = ctx.batch * size_ / cols_;
    if (mean_.size() < rows) {
      mean_ = DeviceArray<float>(backend_, rows);
      rstd_ = DeviceArray<float>(backend_, rows);
    }
    ctx.backend->LayerNormForward(rows, cols_, inputs[0], gamma_, beta_,
                                  epsilon_, output, mean_.data(), rstd_.data());
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    const int64_t rows = ctx.batch * size_ / cols_;
    float* dx = dinputs[0];
    if (dx == nullptr) {
      if (scratch_.size() < rows * cols_) {
        scratch_ = DeviceArray<float>(backend_, rows * cols_);
      }
      dx = scratch_.data();
    }
    ctx.backend->LayerNormBackward(rows, cols_, inputs[0], mean_.data(),
                                   rstd_.data(), gamma_, doutput, dx, dgamma_,
                                   dbeta_);
  }

 private:
  const float epsilon_;
  const int64_t cols_, size_;
  float* const gamma_;
  float* const beta_;
  float* const dgamma_;
  float* const dbeta_;
  Backend* const backend_;
  DeviceArray<float> mean_, rstd_, scratch_;
};

}  // namespace

std::unique_ptr<Layer> NewLayerNormLayer(const LayerSpec& spec,
                                         Backend* backend) {
  return std::make_unique<LayerNormLayerImpl>(spec, backend);
}

}  // namespace tessera
