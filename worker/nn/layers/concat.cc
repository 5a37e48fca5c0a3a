// Concat along any axis of the per-example shape: each input is a block of
// columns of the output once the dimensions before the axis count as rows.
#include "worker/nn/layers/layers.h"

namespace tessera {
namespace {

class ConcatLayerImpl final : public Layer {
 public:
  explicit ConcatLayerImpl(const LayerSpec& spec) {
    const int rank = static_cast<int>(spec.output.size());
    int axis = spec.def->concat().axis();
    if (axis < 0) axis += rank;
    outer_ = 1;
    for (int d = 0; d < axis; ++d) outer_ *= spec.output[d];
    total_ = NumElements(spec.output) / outer_;
    for (const TensorFacts& in : spec.inputs) {
      inner_.push_back(NumElements(in.shape) / outer_);
    }
  }

  void Forward(const StepContext& ctx, absl::Span<const float* const> inputs,
               float* output) override {
    int64_t at = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ctx.backend->Copy2D(ctx.batch * outer_, inner_[i], inputs[i], inner_[i],
                          output + at, total_, 0.0f);
      at += inner_[i];
    }
  }

  void Backward(const StepContext& ctx, absl::Span<const float* const> inputs,
                const float* output, const float* doutput,
                absl::Span<float* const> dinputs) override {
    int64_t at = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (dinputs[i] != nullptr) {
        ctx.backend->Copy2D(ctx.batch * outer_, inner_[i], doutput + at, total_,
                            dinputs[i], inner_[i], 0.0f);
      }
      at += inner_[i];
    }
  }

 private:
  int64_t outer_ = 1, total_ = 0;
  std::vector<int64_t> inner_;
};

}  // namespace

std::unique_ptr<Layer> NewConcatLayer(const LayerSpec& spec) {
  return std::make_unique<ConcatLayerImpl>(spec);
}

}  // namespace tessera
