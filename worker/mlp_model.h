#ifndef TESSERA_WORKER_MLP_MODEL_H_
#define TESSERA_WORKER_MLP_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "proto/job.pb.h"
#include "worker/backend.h"

namespace tessera {

struct BatchResult {
  double loss_sum = 0;  // summed over the batch
  int64_t correct = 0;
  int64_t examples = 0;
};

// The course's MNIST model on any backend: Flatten -> [Dense(h, ReLU) ->
// Dropout(rate)]* -> Dense(classes) -> softmax cross-entropy. Its variables
// are exactly ModelVariables(config), in that order.
//
// Thread safety: one thread at a time (it owns activation buffers).
class MlpModel {
 public:
  // `backend` must outlive the model.
  static absl::StatusOr<std::unique_ptr<MlpModel>> Create(
      const ModelConfig& config, Backend* backend);

  const std::vector<VariableDef>& variables() const { return variables_; }
  int64_t input_dim() const { return widths_.front(); }
  int64_t num_classes() const { return widths_.back(); }

  // Copies every variable's value (variables() order, exact sizes) to the
  // device. InvalidArgument names a variable whose size does not match.
  absl::Status SetParameters(absl::Span<const absl::Span<const float>> values);

  // One forward and backward pass with dropout drawn from `seed` over the
  // batch of labels.size() examples whose features are `x` (row-major,
  // input_dim() per example); writes the gradient of the batch's mean loss
  // of every variable into `grads` (host memory, variables() order, exact
  // sizes). InvalidArgument when x.size() is not labels.size() *
  // input_dim() (naming both), the batch is empty, or a label is outside
  // [0, num_classes()).
  absl::StatusOr<BatchResult> TrainStep(
      absl::Span<const float> x, absl::Span<const int32_t> labels,
      uint64_t seed, absl::Span<const absl::Span<float>> grads);
  // The same over raw pointers, for callers that know the sizes.
  // REQUIRES: `x` holds batch * input_dim() floats and `labels` batch labels.
  absl::StatusOr<BatchResult> TrainStep(
      const float* x, const int32_t* labels, int64_t batch, uint64_t seed,
      absl::Span<const absl::Span<float>> grads);

  // Forward pass without dropout; the sizes are checked as in TrainStep.
  absl::StatusOr<BatchResult> Evaluate(absl::Span<const float> x,
                                       absl::Span<const int32_t> labels);
  // REQUIRES: as the pointer TrainStep.
  absl::StatusOr<BatchResult> Evaluate(const float* x, const int32_t* labels,
                                       int64_t batch);

 private:
  MlpModel(std::vector<VariableDef> variables, std::vector<int64_t> widths,
           float dropout, Backend* backend);
  absl::Status CheckLabels(const int32_t* labels, int64_t batch) const;
  // CheckLabels and that `x` holds exactly input_dim() features per label.
  absl::Status CheckBatch(absl::Span<const float> x,
                          absl::Span<const int32_t> labels) const;
  void Reserve(int64_t batch);
  void Forward(const float* x, const int32_t* labels, int64_t batch,
               bool training, uint64_t seed);

  const std::vector<VariableDef> variables_;
  const std::vector<int64_t> widths_;  // input, hidden..., classes
  const float dropout_;
  Backend* const backend_;

  std::vector<DeviceArray<float>> params_;  // kernel, bias per layer
  std::vector<DeviceArray<float>> grads_;
  int64_t capacity_ = 0;
  DeviceArray<float> input_;
  DeviceArray<int32_t> labels_;
  // Per layer l: pre_[l] holds the layer's output after ReLU and before
  // dropout, post_[l] after dropout (input of layer l + 1); the last
  // layer's pre_ holds the logits.
  std::vector<DeviceArray<float>> pre_, post_, delta_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_MLP_MODEL_H_
