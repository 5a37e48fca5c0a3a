#include "common/optimizer/rowwise_adagrad.h"

#include <cmath>
#include <vector>

#include "common/optimizer/table_step.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

OptimizerConfig RowwiseConfig(float lr) {
  OptimizerConfig config;
  config.set_learning_rate(lr);
  config.mutable_rowwise_adagrad();
  return config;
}

// FBGEMM's EXACT_ROWWISE_ADAGRAD written out in double for one row.
void ReferenceStep(std::vector<double>* w, double* acc,
                   const std::vector<float>& g, double lr, double eps) {
  double sum = 0;
  for (float x : g) sum += double{x} * x;
  *acc += sum / g.size();
  for (size_t j = 0; j < g.size(); ++j) {
    (*w)[j] -= lr * g[j] / (std::sqrt(*acc) + eps);
  }
}

TEST(RowwiseAdagradTest, MatchesTheReferenceOverSteps) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt =
      CreateOptimizer(RowwiseConfig(0.05f));
  ASSERT_TRUE(opt.ok()) << opt.status();
  const Optimizer& o = **opt;
  EXPECT_EQ(o.name(), "rowwise_adagrad");
  EXPECT_EQ(o.num_slots(), 1);
  EXPECT_EQ(o.slot_name(0), "row_accumulator");
  EXPECT_EQ(o.slot_row_elements(0, 64), 1);
  EXPECT_TRUE(o.row_wise());
  EXPECT_EQ(o.slot_initial_value(0), 0.0f);

  constexpr int kDim = 8;
  std::vector<float> w(kDim);
  std::vector<double> ref(kDim);
  for (int j = 0; j < kDim; ++j) w[j] = ref[j] = 0.1f * j - 0.3f;
  float acc = 0;
  double ref_acc = 0;
  float* slots[] = {&acc};
  for (int t = 1; t <= 20; ++t) {
    std::vector<float> g(kDim);
    for (int j = 0; j < kDim; ++j) g[j] = std::sin(0.7 * t + j) * 0.5f;
    o.Apply(w.data(), g.data(), slots, kDim, t);
    ReferenceStep(&ref, &ref_acc, g, 0.05, 1e-8);
  }
  EXPECT_NEAR(acc, ref_acc, 1e-5 * ref_acc);
  for (int j = 0; j < kDim; ++j) EXPECT_NEAR(w[j], ref[j], 1e-5) << j;
}

TEST(RowwiseAdagradTest, TableStepKeepsOneAccumulatorPerRow) {
  OptimizerConfig config = RowwiseConfig(0.1f);
  config.mutable_rowwise_adagrad()->set_initial_accumulator_value(0.5f);
  config.set_table_updates(TABLE_UPDATES_DENSE);  // the same as lazy here
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  ASSERT_TRUE(opt.ok()) << opt.status();
  constexpr int kRows = 4, kDim = 3;
  std::vector<float> values(kRows * kDim, 1.0f);
  std::vector<float> acc(kRows, 0.5f);
  std::vector<float*> slots = {acc.data()};
  std::vector<float> scratch;
  const std::vector<int64_t> touched = {2, 0};
  const std::vector<float> grads = {1, 2, 3, -1, 0, 1};
  ApplyTableStep(**opt, kRows, kDim, touched, grads, 1, values.data(), slots,
                 &scratch);
  // Row 2: acc = 0.5 + (1 + 4 + 9) / 3; row 0: acc = 0.5 + 2 / 3.
  const double acc2 = 0.5 + 14.0 / 3, acc0 = 0.5 + 2.0 / 3;
  EXPECT_NEAR(acc[2], acc2, 1e-6);
  EXPECT_NEAR(acc[0], acc0, 1e-6);
  EXPECT_EQ(acc[1], 0.5f);
  EXPECT_EQ(acc[3], 0.5f);
  EXPECT_NEAR(values[2 * kDim + 2], 1 - 0.1 * 3 / (std::sqrt(acc2) + 1e-8),
              1e-6);
  EXPECT_NEAR(values[0], 1 + 0.1 / (std::sqrt(acc0) + 1e-8), 1e-6);
  EXPECT_EQ(values[1 * kDim], 1.0f);  // untouched rows stay
}

// The accumulator's sum has one order (the header's eight lanes), so a
// row's bits do not depend on how the sum is computed; written here as
// the header states it, one element at a time.
float LaneOrderedSumOfSquares(const std::vector<float>& g) {
  float lane[8] = {};
  for (size_t j = 0; j < g.size(); ++j) lane[j % 8] += g[j] * g[j];
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
         ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

TEST(RowwiseAdagradTest, SumsSquaresInTheDocumentedLaneOrder) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt =
      CreateOptimizer(RowwiseConfig(0.05f));
  ASSERT_TRUE(opt.ok()) << opt.status();
  const auto& rowwise = static_cast<const RowwiseAdagradOptimizer&>(**opt);
  for (int dim : {1, 3, 8, 13, 16, 64, 100}) {
    std::vector<float> g(dim);
    // Magnitudes spread over 2^-10..2^10, so another order rounds
    // differently.
    for (int j = 0; j < dim; ++j) {
      g[j] = std::ldexp(1.0f + 0.37f * j, (j * 7) % 21 - 10) *
             (j % 3 == 0 ? -1.0f : 1.0f);
    }
    float acc = 0.25f;
    const float step = rowwise.AccumulateRow(g.data(), dim, 0.05f, &acc);
    const float want = 0.25f + LaneOrderedSumOfSquares(g) / dim;
    EXPECT_EQ(acc, want) << "dim " << dim;
    EXPECT_EQ(step, 0.05f / (std::sqrt(want) + 1e-8f)) << "dim " << dim;
  }
}

TEST(RowwiseAdagradTest, RefusesBadOptions) {
  OptimizerConfig config = RowwiseConfig(0.1f);
  config.mutable_rowwise_adagrad()->set_epsilon(0);
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  ASSERT_FALSE(opt.ok());
  EXPECT_NE(opt.status().message().find("rowwise_adagrad.epsilon"),
            std::string::npos);
  config.mutable_rowwise_adagrad()->set_initial_accumulator_value(-1);
  opt = CreateOptimizer(config);
  ASSERT_FALSE(opt.ok());
  EXPECT_NE(opt.status().message().find("initial_accumulator_value"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
