#include "common/optimizer/rowwise_adagrad.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {

void RowwiseAdagradOptimizer::Apply(float* values, const float* grad,
                                    float* const* slots, int64_t n,
                                    UpdateStep t) const {
  if (n <= 0) return;
  const float lr = BeginUpdate(values, n, t);
  const float step = AccumulateRow(grad, n, lr, slots[0]);
  for (int64_t j = 0; j < n; ++j) values[j] -= step * grad[j];
}

float RowwiseAdagradOptimizer::AccumulateRow(const float* grad, int64_t n,
                                             float lr,
                                             float* accumulator) const {
  // Eight running sums rather than one: a single chain of n dependent adds
  // was most of a dim-64 row's step, and its order is part of the result,
  // so the lanes and their final pairing are fixed (see the header).
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) lane[l] += grad[j + l] * grad[j + l];
  }
  for (int l = 0; j < n; ++j, ++l) lane[l] += grad[j] * grad[j];
  const float sum = ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
                    ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  *accumulator += sum / static_cast<float>(n);
  return lr / (std::sqrt(*accumulator) + epsilon_);
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateRowwiseAdagrad(
    float learning_rate, const RowwiseAdagradOptions& options) {
  const float initial =
      options.has_initial_accumulator_value()
          ? options.initial_accumulator_value()
          : RowwiseAdagradOptimizer::kDefaultInitialAccumulator;
  const float epsilon = options.has_epsilon()
                            ? options.epsilon()
                            : RowwiseAdagradOptimizer::kDefaultEpsilon;
  if (!(initial >= 0) || !std::isfinite(initial)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.rowwise_adagrad.initial_accumulator_value must be a finite "
        "number >= 0, got ",
        initial));
  }
  if (!(epsilon >= 0) || !std::isfinite(epsilon) ||
      (initial == 0 && epsilon == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.rowwise_adagrad.epsilon must be a finite number >= 0, and "
        "> 0 when initial_accumulator_value is 0, got ",
        epsilon));
  }
  return std::make_unique<RowwiseAdagradOptimizer>(learning_rate, initial,
                                                   epsilon);
}

}  // namespace tessera
