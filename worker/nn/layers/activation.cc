// Activation: an elementwise function (or softmax over the last axis).
#include "worker/nn/layers/layers.h"

namespace tessera {

void ActivationForward(Backend* backend, Activation activation, int64_t rows,
                       int64_t cols, float* x) {
  const int64_t n = rows * cols;
  switch (activation) {
    case RELU:
      // The in-place ReLU the first models used, so their graphs match
      // them bit for bit.
      backend->Relu(n, x);
      break;
    case SIGMOID:
      backend->UnaryForward(Backend::Unary::kSigmoid, n, x, x);
      break;
    case TANH:
      backend->UnaryForward(Backend::Unary::kTanh, n, x, x);
      break;
    case SOFTMAX:
      backend->SoftmaxForward(rows, cols, x, x);
      break;
    default:
      break;
  }
}

void ActivationBackward(Backend* backend, Activation activation, int64_t rows,
                        int64_t cols, const float* y, const float* dy,
                        float* dx) {
  // One pass from dy into dx (which may be dy itself).
  const int64_t n = rows * cols;
  switch (activation) {
    case RELU:
      backend->UnaryBackward(Backend::Unary::kRelu, n, y, dy, dx);
      break;
    case SIGMOID:
      backend->UnaryBackward(Backend::Unary::kSigmoid, n, y, dy, dx);
      break;
    case TANH:
      backend->UnaryBackward(Backend::Unary::kTanh, n, y, dy, dx);
      break;
    case SOFTMAX:
      backend->SoftmaxBackward(rows, cols, y, dy, dx);
      break;
    default:
      if (dx != dy) backend->CopyOnDevice(dy, dx, n * sizeof(float));
      break;
  }
}

namespace {

class ActivationLayerImpl final : public Layer {
 public:
  explicit ActivationLayerImpl(const LayerSpec& spec)
      : activation_(spec.def->activation().activation()),
        cols_(spec.output.back()),
        size_(NumElements(spec.output)) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    ctx.backend->CopyOnDevice(inputs[0], output,
                              ctx.batch * size_ * sizeof(float));
    ActivationForward(ctx.backend, activation_, ctx.batch * size_ / cols_,
                      cols_, output);
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    if (dinputs[0] == nullptr) return;
    ActivationBackward(ctx.backend, activation_, ctx.batch * size_ / cols_,
                       cols_, output, doutput, dinputs[0]);
  }

 private:
  const Activation activation_;
  const int64_t cols_, size_;
};

}  // namespace

std::unique_ptr<Layer> NewActivationLayer(const LayerSpec& spec,
                                          Backend* backend) {
  return std::make_unique<ActivationLayerImpl>(spec);
}

}  // namespace tessera
