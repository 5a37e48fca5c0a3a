// MaxPool2D on NHWC images; the forward pass keeps where each maximum came
// from, so the backward pass routes each gradient back without searching.
#include "worker/nn/layers/layers.h"
#include "worker/nn/layers/window.h"

namespace tessera {
namespace {

class MaxPool2DLayerImpl final : public Layer {
 public:
  MaxPool2DLayerImpl(const LayerSpec& spec, Backend* backend)
      : window_(LayerWindow(spec.inputs[0].shape,
                            spec.def->max_pool2d().pool_size(0),
                            spec.def->max_pool2d().pool_size(1),
                            spec.def->max_pool2d().strides(0),
                            spec.def->max_pool2d().strides(1),
                            spec.def->max_pool2d().padding())),
        backend_(backend) {}

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    Backend::Window2D g = window_;
    g.batch = ctx.batch;
    const int64_t n = ctx.batch * g.out_h * g.out_w * g.channels;
    if (argmax_.size() < n) argmax_ = DeviceArray<int64_t>(backend_, n);
    ctx.backend->MaxPoolForward(g, inputs[0], output, argmax_.data());
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    if (dinputs[0] == nullptr) return;
    Backend::Window2D g = window_;
    g.batch = ctx.batch;
    ctx.backend->MaxPoolBackward(g, doutput, argmax_.data(), dinputs[0]);
  }

 private:
  const Backend::Window2D window_;
  Backend* const backend_;
  DeviceArray<int64_t> argmax_;  // where each output's maximum came from
};

}  // namespace

std::unique_ptr<Layer> NewMaxPool2DLayer(const LayerSpec& spec,
                                         Backend* backend) {
  return std::make_unique<MaxPool2DLayerImpl>(spec, backend);
}

}  // namespace tessera
