#include "worker/params/mirrored_parameters.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

std::vector<VariableDef> TwoVariables() {
  VariableDef kernel{"dense_0/kernel", {2, 3}, {}};
  kernel.initializer.set_kind(Initializer::UNIFORM);
  kernel.initializer.set_minval(-1);
  kernel.initializer.set_maxval(1);
  kernel.initializer.set_seed(7);
  VariableDef bias{"dense_0/bias", {3}, {}};
  return {kernel, bias};
}

OptimizerConfig Sgd(float lr) {
  OptimizerConfig c;
  c.set_learning_rate(lr);
  c.mutable_sgd();
  return c;
}

void FillGradients(MirroredParameters* p, float base) {
  float x = base;
  for (absl::Span<float> g : p->gradients()) {
    for (float& v : g) v = (x += 0.25f);
  }
}

// The all-reduce of two replicas, by hand: both end with the same sum.
void AllReduceByHand(MirroredParameters* a, MirroredParameters* b) {
  std::vector<float> sum(a->reduce_buffer().size());
  for (size_t i = 0; i < sum.size(); ++i) {
    sum[i] = a->reduce_buffer()[i] + b->reduce_buffer()[i];
  }
  std::copy(sum.begin(), sum.end(), a->reduce_buffer().begin());
  std::copy(sum.begin(), sum.end(), b->reduce_buffer().begin());
}

TEST(MirroredParameters, ReplicasStartIdentical) {
  auto a = MirroredParameters::Create(TwoVariables(), Sgd(0.1f));
  auto b = MirroredParameters::Create(TwoVariables(), Sgd(0.1f));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->Checksum(), (*b)->Checksum());
  EXPECT_EQ((*a)->reduce_buffer().size(), 2u * 3 + 3 + 1);
  EXPECT_NE((*a)->values()[0][0], 0.0f);  // the kernel was initialised
}

TEST(MirroredParameters, WeightedSumGivesTheGlobalBatchMean) {
  // Worker A saw 3 examples with mean gradient gA, worker B 1 with gB: the
  // global mean is (3 gA + gB) / 4.
  auto a = *MirroredParameters::Create(TwoVariables(), Sgd(1.0f));
  auto b = *MirroredParameters::Create(TwoVariables(), Sgd(1.0f));
  std::vector<float> before(a->values()[0].begin(), a->values()[0].end());
  FillGradients(a.get(), 0.0f);
  FillGradients(b.get(), 10.0f);
  const float ga0 = a->gradients()[0][0], gb0 = b->gradients()[0][0];
  a->SetWeight(3);
  b->SetWeight(1);
  AllReduceByHand(a.get(), b.get());
  ASSERT_TRUE(a->ApplyReduced().ok());
  ASSERT_TRUE(b->ApplyReduced().ok());
  EXPECT_EQ(a->Checksum(), b->Checksum());
  EXPECT_NEAR(a->values()[0][0], before[0] - (3 * ga0 + gb0) / 4, 1e-6);
  EXPECT_EQ(a->updates(), 1);
}

// BatchNorm's moving mean in mirrored mode: the replicas' batch means,
// weighted by their examples, are folded in with the variable's own rule
// (v = m v + (1 - m) mean), not with the job's optimizer.
TEST(MirroredParameters, MovingStatisticFollowsItsRule) {
  VariableDef kernel = TwoVariables()[0];
  VariableDef moving{"bn/moving_mean", {2}, {}};
  moving.initializer.set_kind(Initializer::ONES);
  OptimizerConfig rule;
  rule.mutable_moving_average()->set_momentum(0.9f);
  moving.update_rule = rule;
  auto a = *MirroredParameters::Create({kernel, moving}, Sgd(1.0f));
  auto b = *MirroredParameters::Create({kernel, moving}, Sgd(1.0f));
  // Replica A's batch of 3 has means (2, 4); B's batch of 1 has (6, 8).
  FillGradients(a.get(), 0.0f);
  FillGradients(b.get(), 0.0f);
  a->gradients()[1][0] = 2;
  a->gradients()[1][1] = 4;
  b->gradients()[1][0] = 6;
  b->gradients()[1][1] = 8;
  a->SetWeight(3);
  b->SetWeight(1);
  AllReduceByHand(a.get(), b.get());
  ASSERT_TRUE(a->ApplyReduced().ok());
  ASSERT_TRUE(b->ApplyReduced().ok());
  EXPECT_EQ(a->Checksum(), b->Checksum());
  // The global batch's means are (3, 5).
  EXPECT_NEAR(a->values()[1][0], 0.9f * 1 + 0.1f * 3, 1e-6);
  EXPECT_NEAR(a->values()[1][1], 0.9f * 1 + 0.1f * 5, 1e-6);
}

// Issue #44: the clipping runs after the all-reduce, on the global batch's
// mean gradient (Keras under MirroredStrategy), and leaves a moving
// statistic out of the norm and unclipped.
TEST(MirroredParameters, ClipsTheAllReducedMeanGradient) {
  VariableDef w{"w", {2}, {}};  // zeros
  VariableDef moving{"bn/moving_mean", {1}, {}};
  OptimizerConfig rule;
  rule.mutable_moving_average()->set_momentum(0.5f);
  moving.update_rule = rule;
  OptimizerConfig sgd = Sgd(1.0f);
  sgd.mutable_clipping()->set_global_norm(1.0f);
  auto a = *MirroredParameters::Create({w, moving}, sgd);
  auto b = *MirroredParameters::Create({w, moving}, sgd);
  // Both replicas' mean gradient is (3, 4) (1 and 3 examples), their batch
  // mean 10: the global mean gradient (3, 4) has norm 5, clipped to
  // (0.6, 0.8); the moving mean folds in 10 unclipped.
  for (MirroredParameters* p : {a.get(), b.get()}) {
    p->gradients()[0][0] = 3;
    p->gradients()[0][1] = 4;
    p->gradients()[1][0] = 10;
  }
  a->SetWeight(1);
  b->SetWeight(3);
  AllReduceByHand(a.get(), b.get());
  ASSERT_TRUE(a->ApplyReduced().ok());
  ASSERT_TRUE(b->ApplyReduced().ok());
  EXPECT_EQ(a->Checksum(), b->Checksum());
  EXPECT_NEAR(a->values()[0][0], -0.6f, 1e-6);
  EXPECT_NEAR(a->values()[0][1], -0.8f, 1e-6);
  EXPECT_NEAR(a->values()[1][0], 0.5f * 0 + 0.5f * 10, 1e-6);
}

TEST(MirroredParameters, ZeroWeightChangesNothing) {
  auto a = *MirroredParameters::Create(TwoVariables(), Sgd(1.0f));
  const uint32_t before = a->Checksum();
  a->ZeroGradients();
  ASSERT_TRUE(a->ApplyReduced().ok());
  EXPECT_EQ(a->Checksum(), before);
  EXPECT_EQ(a->updates(), 0);
}

TEST(MirroredParameters, NonFiniteSumIsRefusedNamingTheVariable) {
  auto a = *MirroredParameters::Create(TwoVariables(), Sgd(1.0f));
  const uint32_t before = a->Checksum();
  FillGradients(a.get(), 0.0f);
  a->gradients()[1][2] = std::numeric_limits<float>::quiet_NaN();
  a->SetWeight(2);
  absl::Status s = a->ApplyReduced();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), ::testing::HasSubstr("dense_0/bias"));
  EXPECT_EQ(a->Checksum(), before);
}

}  // namespace
}  // namespace tessera
