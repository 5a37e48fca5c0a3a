// DotInteraction (DLRM): the dot products of every pair of the stacked
// feature vectors, as one batched GEMM T T^T whose lower triangle is
// gathered row by row: (1,0), (2,0), (2,1), (3,0), ... (with
// self_interaction the diagonal too: (0,0), (1,0), (1,1), ...), optionally
// after the first input itself.
#include "worker/nn/layers/feature_stack.h"
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class DotInteractionLayerImpl final : public Layer {
 public:
  DotInteractionLayerImpl(const LayerSpec& spec, Backend* backend)
      : stack_(spec.inputs),
        first_(spec.def->dot_interaction().concat_first_input()
                   ? NumElements(spec.inputs[0].shape)
                   : 0),
        width_(spec.output[0]),
        backend_(backend) {
    const int64_t f = stack_.count();
    std::vector<int32_t> pairs;
    const bool self = spec.def->dot_interaction().self_interaction();
    for (int64_t i = 0; i < f; ++i) {
      for (int64_t j = 0; j < (self ? i + 1 : i); ++j) {
        pairs.push_back(static_cast<int32_t>(i * f + j));
      }
    }
    pairs_ = static_cast<int64_t>(pairs.size());
    index_ = DeviceArray<int32_t>(backend, pairs_);
    backend->CopyToDevice(pairs.data(), index_.data(),
                          pairs_ * sizeof(int32_t));
  }

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    const int64_t f = stack_.count(), d = stack_.dim(), b = ctx.batch;
    Reserve(b);
    stack_.Stack(ctx.backend, b, inputs, stacked_.data());
    ctx.backend->BatchedGemm(false, true, f, f, d, 1.0f, stacked_.data(), f * d,
                             stacked_.data(), f * d, 0.0f, dots_.data(), f * f,
                             b);
    ctx.backend->GatherColumns(b, f * f, dots_.data(), pairs_, index_.data(),
                               pairs_out_.data());
    if (first_ > 0) {
      ctx.backend->Copy2D(b, first_, inputs[0], first_, output, width_, 0.0f);
    }
    ctx.backend->Copy2D(b, pairs_, pairs_out_.data(), pairs_, output + first_,
                        width_, 0.0f);
  }

  // With Z = T T^T, dT = (dZ + dZ^T) T.
  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    const int64_t f = stack_.count(), d = stack_.dim(), b = ctx.batch;
    ctx.backend->Copy2D(b, pairs_, doutput + first_, width_, pairs_out_.data(),
                        pairs_, 0.0f);
    ctx.backend->ScatterColumns(b, pairs_, pairs_out_.data(), index_.data(),
                                f * f, dots_.data());
    ctx.backend->BatchedGemm(false, false, f, d, f, 1.0f, dots_.data(), f * f,
                             stacked_.data(), f * d, 0.0f, dstacked_.data(),
                             f * d, b);
    ctx.backend->BatchedGemm(true, false, f, d, f, 1.0f, dots_.data(), f * f,
                             stacked_.data(), f * d, 1.0f, dstacked_.data(),
                             f * d, b);
    stack_.Split(ctx.backend, b, dstacked_.data(), dinputs);
    if (first_ > 0 && dinputs[0] != nullptr) {
      ctx.backend->Copy2D(b, first_, doutput, width_, dinputs[0], first_, 1.0f);
    }
  }

 private:
  void Reserve(int64_t batch) {
    if (batch <= capacity_) return;
    capacity_ = batch;
    const int64_t f = stack_.count(), d = stack_.dim();
    stacked_ = DeviceArray<float>(backend_, batch * f * d);
    dstacked_ = DeviceArray<float>(backend_, batch * f * d);
    dots_ = DeviceArray<float>(backend_, batch * f * f);
    pairs_out_ = DeviceArray<float>(backend_, batch * pairs_);
  }

  const FeatureStack stack_;
  const int64_t first_, width_;
  Backend* const backend_;
  int64_t pairs_ = 0, capacity_ = 0;
  DeviceArray<int32_t> index_;  // flat indices into the [f, f] dots
  DeviceArray<float> stacked_, dstacked_, dots_, pairs_out_;
};

}  // namespace

std::unique_ptr<Layer> NewDotInteractionLayer(const LayerSpec& spec,
                                              Backend* backend) {
  return std::make_unique<DotInteractionLayerImpl>(spec, backend);
}

}  // namespace tessera
