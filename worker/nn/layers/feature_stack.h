#ifndef TESSERA_WORKER_NN_LAYERS_FEATURE_STACK_H_
#define TESSERA_WORKER_NN_LAYERS_FEATURE_STACK_H_

#include <vector>

#include "absl/types/span.h"
#include "worker/nn/layer.h"

namespace tessera {

// DotInteraction and FmOrder2 read feature vectors of one width d from
// inputs of [d] or [n, d]: this stacks them into [batch, count, d] and
// splits a gradient of that shape back into the inputs' gradients.
class FeatureStack {
 public:
  explicit FeatureStack(absl::Span<const TensorFacts> inputs) {
    for (const TensorFacts& in : inputs) {
      widths_.push_back(NumElements(in.shape));
      total_ += widths_.back();
    }
    dim_ = inputs[0].shape.back();
  }
  int64_t count() const { return total_ / dim_; }
  int64_t dim() const { return dim_; }

  void Stack(Backend* backend, int64_t batch,
             absl::Span<const float* const> inputs, float* stacked) const {
    int64_t at = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      backend->Copy2D(batch, widths_[i], inputs[i], widths_[i], stacked + at,
                      total_, 0.0f);
      at += widths_[i];
    }
  }

  void Split(Backend* backend, int64_t batch, const float* dstacked,
             absl::Span<float* const> dinputs) const {
    int64_t at = 0;
    for (size_t i = 0; i < dinputs.size(); ++i) {
      if (dinputs[i] != nullptr) {
        backend->Copy2D(batch, widths_[i], dstacked + at, total_, dinputs[i],
                        widths_[i], 0.0f);
      }
      at += widths_[i];
    }
  }

 private:
  std::vector<int64_t> widths_;
  int64_t total_ = 0, dim_ = 1;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_NN_LAYERS_FEATURE_STACK_H_
