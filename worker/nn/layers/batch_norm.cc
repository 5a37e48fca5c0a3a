// Keras' BatchNormalization over the last axis. In training the batch's
// own moments normalise and, as the "gradients" of moving_mean and
// moving_variance, the layer hands back those moments: the parameter
// servers fold them in with the variables' moving-average rule
// (v = momentum * v + (1 - momentum) * pushed), so every mode updates the
// statistics through the push it already has. Evaluation normalises with
// the moving statistics.
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class BatchNormLayerImpl final : public Layer {
 public:
  BatchNormLayerImpl(const LayerSpec& spec, Backend* backend)
      : epsilon_(spec.def->batch_norm().epsilon()),
        cols_(spec.output.back()),
        size_(NumElements(spec.output)),
        gamma_(spec.params.values[0]),
        beta_(spec.params.values[1]),
        moving_mean_(spec.params.values[2]),
        moving_var_(spec.params.values[3]),
        dgamma_(spec.params.grads[0]),
        dbeta_(spec.params.grads[1]),
        batch_mean_(spec.params.grads[2]),
        batch_var_(spec.params.grads[3]),
        backend_(backend) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    const int64_t rows = ctx.batch * size_ / cols_;
    if (!ctx.training) {
      ctx.backend->BatchNormForward(rows, cols_, inputs[0], moving_mean_,
                                    moving_var_, gamma_, beta_, epsilon_,
                                    output);
      return;
    }
    ctx.backend->ColumnMoments(rows, cols_, inputs[0], batch_mean_, batch_var_);
    ctx.backend->BatchNormForward(rows, cols_, inputs[0], batch_mean_,
                                  batch_var_, gamma_, beta_, epsilon_, output);
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
    ctx.backend->BatchNormBackward(rows, cols_, inputs[0], batch_mean_,
                                   batch_var_, gamma_, epsilon_, doutput, dx,
                                   dgamma_, dbeta_);
  }

 private:
  const float epsilon_;
  const int64_t cols_, size_;
  float* const gamma_;
  float* const beta_;
  float* const moving_mean_;
  float* const moving_var_;
  float* const dgamma_;
  float* const dbeta_;
  // The pushed values of moving_mean and moving_variance.
  float* const batch_mean_;
  float* const batch_var_;
  Backend* const backend_;
  DeviceArray<float> scratch_;
};

}  // namespace

std::unique_ptr<Layer> NewBatchNormLayer(const LayerSpec& spec,
                                         Backend* backend) {
  return std::make_unique<BatchNormLayerImpl>(spec, backend);
}

}  // namespace tessera
