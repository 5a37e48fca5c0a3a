// Gradient clipping against hand-computed references of Keras' formulas
// (clipvalue, clipnorm, global_clipnorm; issue #44 item 3).

#include "common/optimizer/gradient_clipping.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::HasSubstr;

GradientClip Value(float v) { return {.value = v}; }
GradientClip Norm(float n) { return {.norm = n}; }
GradientClip Global(float n) { return {.global_norm = n}; }

TEST(GradientClippingTest, ValueClampsEachElement) {
  std::vector<float> g = {-1.0f, 0.2f, 0.7f, -0.3f};
  const GradientClip c = Value(0.5f);
  ClipGradients({{absl::MakeSpan(g), &c}});
  EXPECT_THAT(g, ElementsAre(-0.5f, 0.2f, 0.5f, -0.3f));
}

TEST(GradientClippingTest, NormScalesEachVariableOnItsOwn) {
  // |(3, 4)| = 5 > 1: scaled by 1/5; |(0.1)| = 0.1 <= 1: as it is.
  std::vector<float> a = {3.0f, 4.0f}, b = {0.1f};
  const GradientClip c = Norm(1.0f);
  ClipGradients({{absl::MakeSpan(a), &c}, {absl::MakeSpan(b), &c}});
  EXPECT_THAT(a, ElementsAre(FloatEq(0.6f), FloatEq(0.8f)));
  EXPECT_THAT(b, ElementsAre(0.1f));
}

TEST(GradientClippingTest, GlobalNormScalesAllVariablesTogether) {
  // |(3, 4, 12)| = 13; 6.5 / 13 = 0.5 for every variable of the group,
  // whatever its own norm.
  std::vector<float> a = {3.0f, 4.0f}, b = {12.0f}, small = {0.0f};
  const GradientClip c = Global(6.5f);
  ClipGradients({{absl::MakeSpan(a), &c, 0},
                 {absl::MakeSpan(b), &c, 0},
                 {absl::MakeSpan(small), &c, 0}});
  EXPECT_THAT(a, ElementsAre(FloatEq(1.5f), FloatEq(2.0f)));
  EXPECT_THAT(b, ElementsAre(FloatEq(6.0f)));
  EXPECT_THAT(small, ElementsAre(0.0f));
}

TEST(GradientClippingTest, GlobalNormBelowTheThresholdChangesNothing) {
  std::vector<float> a = {3.0f, 4.0f}, b = {12.0f};
  const std::vector<float> a0 = a, b0 = b;
  const GradientClip c = Global(13.0f);
  ClipGradients({{absl::MakeSpan(a), &c}, {absl::MakeSpan(b), &c}});
  EXPECT_EQ(a, a0);
  EXPECT_EQ(b, b0);
}

TEST(GradientClippingTest, GroupsHaveTheirOwnGlobalNorm) {
  // Group 0: |(3, 4)| = 5 -> 1/5. Group 1: |(6, 8)| = 10 -> 2/10. A
  // variable of another optimizer without clipping stays.
  std::vector<float> a = {3.0f, 4.0f}, b = {6.0f, 8.0f}, c = {100.0f};
  const GradientClip one = Global(1.0f), two = Global(2.0f), off;
  ClipGradients({{absl::MakeSpan(a), &one, 0},
                 {absl::MakeSpan(b), &two, 1},
                 {absl::MakeSpan(c), &off, 2}});
  EXPECT_THAT(a, ElementsAre(FloatEq(0.6f), FloatEq(0.8f)));
  EXPECT_THAT(b, ElementsAre(FloatEq(1.2f), FloatEq(1.6f)));
  EXPECT_THAT(c, ElementsAre(100.0f));
  std::vector<float> d = {3.0f, 4.0f}, e = {12.0f};
  EXPECT_DOUBLE_EQ(
      GlobalNorm({{absl::MakeSpan(d), &one, 0}, {absl::MakeSpan(e), &one, 0}},
                 0),
      13.0);
}

TEST(GradientClippingTest, WeightedSumIsClippedAsItsMean) {
  // A mirrored all-reduce's sum over 4 examples of mean gradient (3, 4):
  // (12, 16). Clipping the mean to norm 1 gives (0.6, 0.8), so the sum
  // becomes (2.4, 3.2); by value 0.5 the mean is (0.5, 0.5), the sum (2, 2).
  std::vector<float> by_norm = {12.0f, 16.0f}, by_value = {12.0f, 16.0f},
                     by_global = {12.0f, 16.0f};
  const GradientClip n = Norm(1.0f), v = Value(0.5f), g = Global(1.0f);
  ClipGradients({{absl::MakeSpan(by_norm), &n, 0},
                 {absl::MakeSpan(by_value), &v, 1},
                 {absl::MakeSpan(by_global), &g, 2}},
                /*weight=*/4);
  EXPECT_THAT(by_norm, ElementsAre(FloatEq(2.4f), FloatEq(3.2f)));
  EXPECT_THAT(by_value, ElementsAre(2.0f, 2.0f));
  EXPECT_THAT(by_global, ElementsAre(FloatEq(2.4f), FloatEq(3.2f)));
}

TEST(GradientClippingTest, NonFiniteGradientsAreLeftForTheCheck) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {inf, 4.0f}, b = {12.0f}, v = {nan, inf, 2.0f};
  const GradientClip g = Global(1.0f), value = Value(1.0f);
  ClipGradients({{absl::MakeSpan(a), &g, 0},
                 {absl::MakeSpan(b), &g, 0},
                 {absl::MakeSpan(v), &value, 1}});
  EXPECT_EQ(a[0], inf);
  EXPECT_EQ(a[1], 4.0f);
  EXPECT_EQ(b[0], 12.0f);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], inf);
  EXPECT_EQ(v[2], 1.0f);
}

TEST(GradientClippingTest, ValidateNamesTheField) {
  EXPECT_TRUE(ValidateGradientClip({}, "optimizer.clipping").ok());
  EXPECT_TRUE(ValidateGradientClip(Global(1.0f), "optimizer.clipping").ok());
  absl::Status negative = ValidateGradientClip(Norm(-1.0f), "opt.clipping");
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.message(), HasSubstr("opt.clipping.norm"));
  absl::Status nan = ValidateGradientClip(
      Value(std::numeric_limits<float>::quiet_NaN()), "opt.clipping");
  EXPECT_THAT(nan.message(), HasSubstr("opt.clipping.value"));
  absl::Status two =
      ValidateGradientClip({.value = 1.0f, .global_norm = 2.0f}, "x");
  EXPECT_EQ(two.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(two.message(), HasSubstr("at most one"));
}

TEST(GradientClippingTest, ReadFromTheOptimizerConfig) {
  OptimizerConfig config;
  EXPECT_FALSE(GradientClipOf(config).any());
  config.mutable_clipping()->set_global_norm(1.5f);
  const GradientClip c = GradientClipOf(config);
  EXPECT_EQ(c.global_norm, 1.5f);
  EXPECT_EQ(c.value, 0.0f);
  EXPECT_EQ(c.norm, 0.0f);
}

// A plan groups variables by their optimizer: equal configs are one
// optimizer (one global norm), another config another; a variable without
// an optimizer (a moving statistic) is neither clipped nor counted.
TEST(GradientClipPlanTest, OneGlobalNormPerOptimizer) {
  OptimizerConfig dense, tables;
  dense.set_learning_rate(0.1f);
  dense.mutable_clipping()->set_global_norm(1.0f);
  OptimizerConfig dense_copy = dense;
  tables.set_learning_rate(0.2f);
  tables.mutable_clipping()->set_global_norm(1.0f);
  absl::StatusOr<GradientClipPlan> plan = GradientClipPlan::Create(
      {&dense, &dense_copy, nullptr, &tables}, {"a", "b", "moving", "t"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->any());
  // Group {a, b}: |(3, 4, 12)| = 13 -> 1/13. moving: as it is. t: |(0, 2)|
  // = 2 -> 1/2.
  std::vector<float> a = {3.0f, 4.0f}, b = {12.0f}, moving = {100.0f},
                     t = {0.0f, 2.0f};
  plan->Clip({absl::MakeSpan(a), absl::MakeSpan(b), absl::MakeSpan(moving),
              absl::MakeSpan(t)});
  EXPECT_THAT(a, ElementsAre(FloatEq(3.0f / 13), FloatEq(4.0f / 13)));
  EXPECT_THAT(b, ElementsAre(FloatEq(12.0f / 13)));
  EXPECT_THAT(moving, ElementsAre(100.0f));
  EXPECT_THAT(t, ElementsAre(0.0f, FloatEq(1.0f)));

  // An empty span (no gradient this step) is skipped, the rest clipped.
  std::vector<float> c = {6.0f, 8.0f};
  plan->Clip({absl::MakeSpan(c), {}, {}, {}}, /*weight=*/2);
  EXPECT_THAT(c, ElementsAre(FloatEq(1.2f), FloatEq(1.6f)));
}

TEST(GradientClipPlanTest, NamesTheVariableOfABadClipping) {
  OptimizerConfig bad;
  bad.mutable_clipping()->set_norm(-2.0f);
  absl::StatusOr<GradientClipPlan> plan =
      GradientClipPlan::Create({nullptr, &bad}, {"moving", "dense_0/kernel"});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("optimizer of dense_0/kernel: clipping.norm"));
  OptimizerConfig none;
  plan = GradientClipPlan::Create({&none}, {"w"});
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->any());
}

}  // namespace
}  // namespace tessera
