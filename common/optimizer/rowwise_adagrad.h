// Row-wise Adagrad, FBGEMM's EXACT_ROWWISE_ADAGRAD (TorchRec's default for
// embedding tables): one fp32 accumulator per row instead of one per
// element, so a dim-64 row's optimizer state is 4 bytes rather than 256.
#ifndef TESSERA_COMMON_OPTIMIZER_ROWWISE_ADAGRAD_H_
#define TESSERA_COMMON_OPTIMIZER_ROWWISE_ADAGRAD_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/optimizer/optimizer.h"
#include "proto/job.pb.h"

namespace tessera {

// For one row w[0, n) with gradient g[0, n) and accumulator acc (slot 0,
// "row_accumulator", one float per row, starting at
// initial_accumulator_value, default 0):
//   acc += (sum_j g_j^2) / n          (in fp32: lane l = j mod 8 of eight
//                                      running sums takes g_j^2 in element
//                                      order, then the lanes are added as
//                                      ((0+4) + (2+6)) + ((1+5) + (3+7)))
//   w_j -= lr * g_j / (sqrt(acc) + epsilon)   (epsilon default 1e-8)
// with lr the update's scheduled rate (OptimizerConfig.schedule)
// as FBGEMM and TorchRec compute it. A row with a zero gradient does not
// change, so a dense table update equals the lazy one. Tables only: Apply
// must be given exactly one row (row_wise()).
class RowwiseAdagradOptimizer final : public Optimizer {
 public:
  static constexpr float kDefaultEpsilon = 1e-8f;
  static constexpr float kDefaultInitialAccumulator = 0.0f;

  RowwiseAdagradOptimizer(float learning_rate, float initial_accumulator_value,
                          float epsilon)
      : Optimizer(learning_rate),
        initial_accumulator_(initial_accumulator_value),
        epsilon_(epsilon) {}
  int num_slots() const override { return 1; }
  int64_t slot_row_elements(int slot, int64_t dim) const override { return 1; }
  bool row_wise() const override { return true; }
  float slot_initial_value(int slot) const override {
    return initial_accumulator_;
  }
  std::string name() const override { return "rowwise_adagrad"; }
  std::string slot_name(int slot) const override { return "row_accumulator"; }
  void Apply(float* values, const float* grad, float* const* slots, int64_t n,
             UpdateStep t) const override;

  // Apply's first half, shared with the fused narrow-row step
  // (narrow_row_step.h) so both make the same bits: adds the row's mean
  // squared gradient grad[0, n) to *accumulator and returns the step size
  // lr / (sqrt(*accumulator) + epsilon) that every value moves by times
  // its gradient. REQUIRES: n > 0.
  float AccumulateRow(const float* grad, int64_t n, float lr,
                      float* accumulator) const;

 private:
  const float initial_accumulator_, epsilon_;
};

// Validates `options` (initial_accumulator_value finite and >= 0, epsilon
// finite and >= 0 and > 0 when the accumulator starts at 0), with errors
// naming the field.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateRowwiseAdagrad(
    float learning_rate, const RowwiseAdagradOptions& options);

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_ROWWISE_ADAGRAD_H_
