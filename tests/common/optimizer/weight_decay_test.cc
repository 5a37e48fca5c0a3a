// Decoupled weight decay (OptimizerConfig.weight_decay) and the scheduled
// rate as the optimizers apply them, against Keras 3.15.1's own updates:
// keras.optimizers.AdamW / SGD(weight_decay=...) .apply() on a float32
// variable, printed after each step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "common/optimizer/table_step.h"
#include "tests/common/optimizer/optimizer_configs.h"

namespace tessera {
namespace {

using optimizer_test::AdamConfig;
using optimizer_test::MomentumConfig;
using optimizer_test::SgdConfig;
using ::testing::HasSubstr;

std::unique_ptr<Optimizer> Create(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(config);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return optimizer.ok() ? *std::move(optimizer) : nullptr;
}

// The values after each of `grads`, the slots starting at zero.
std::vector<std::vector<float>> RunSteps(
    const Optimizer& optimizer, std::vector<float> values,
    const std::vector<std::vector<float>>& grads) {
  const size_t n = values.size();
  std::vector<std::vector<float>> slots(optimizer.num_slots(),
                                        std::vector<float>(n, 0.0f));
  std::vector<float*> slot_ptrs;
  for (auto& slot : slots) slot_ptrs.push_back(slot.data());
  std::vector<std::vector<float>> after;
  int64_t t = 0;
  for (const std::vector<float>& g : grads) {
    optimizer.Apply(values.data(), g.data(), slot_ptrs.data(),
                    static_cast<int64_t>(n), ++t);
    after.push_back(values);
  }
  return after;
}

void ExpectNear(const std::vector<float>& actual,
                const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-6) << "element " << i;
  }
}

const std::vector<std::vector<float>> kGrads = {
    {0.1f, 0.2f, -0.3f}, {-0.05f, 0.4f, 0.1f}, {0.3f, -0.1f, 0.2f}};

TEST(WeightDecayTest, AdamWIsKeras) {
  // AdamW(learning_rate=0.01, weight_decay=0.1), Keras' defaults otherwise.
  // By hand, step 1: the decay first, w *= 1 - 0.1 * 0.01 -> [0.999,
  // -1.998, 0.4995]; then Adam's first step, lr_t * m / (sqrt(v) + eps)
  // with lr_t = 0.01 * sqrt(0.001) / 0.1, m = 0.1 g, v = 0.001 g^2: about
  // 0.01 * sign(g), less eps's share.
  OptimizerConfig config = AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f);
  config.set_weight_decay(0.1f);
  std::unique_ptr<Optimizer> adamw = Create(config);
  ASSERT_NE(adamw, nullptr);
  auto after = RunSteps(*adamw, {1.0f, -2.0f, 0.5f}, {kGrads[0], kGrads[1]});
  const double decayed[] = {1.0 * 0.999, -2.0 * 0.999, 0.5 * 0.999};
  ExpectNear(after[0], {decayed[0] - 0.0099996838, decayed[1] - 0.0099998419,
                        decayed[2] + 0.0099998946});
  ExpectNear(after[0], {0.98900038, -2.0079999, 0.509499848});
  ExpectNear(after[1], {0.985348105, -2.0156436, 0.512992442});
}

TEST(WeightDecayTest, SgdMomentumWithWeightDecayIsKeras) {
  // SGD(learning_rate=0.1, momentum=0.9, weight_decay=0.01)
  OptimizerConfig config = MomentumConfig(0.1f, 0.9f, false);
  config.set_weight_decay(0.01f);
  std::unique_ptr<Optimizer> sgd = Create(config);
  ASSERT_NE(sgd, nullptr);
  auto after = RunSteps(*sgd, {1.0f, -2.0f, 0.5f}, {kGrads[0], kGrads[1]});
  ExpectNear(after[0], {0.989000022, -2.01800013, 0.529500008});
  ExpectNear(after[1], {0.984010994, -2.07398224, 0.5459705});
}

TEST(WeightDecayTest, PlainSgdWeightDecayIsL2) {
  // w -= lr * wd * w; w -= lr * g  ==  w -= lr * (g + wd * w) up to
  // rounding: L2 regularisation of wd / 2 * |w|^2.
  OptimizerConfig config = SgdConfig(0.5f);
  config.set_weight_decay(0.2f);
  std::unique_ptr<Optimizer> sgd = Create(config);
  ASSERT_NE(sgd, nullptr);
  auto after = RunSteps(*sgd, {1.0f, -2.0f}, {{0.1f, 0.2f}});
  ExpectNear(after[0],
             {1.0 - 0.5 * (0.1 + 0.2 * 1.0), -2.0 - 0.5 * (0.2 + 0.2 * -2.0)});
}

TEST(WeightDecayTest, AdamWWithCosineWarmupIsKeras) {
  // AdamW(learning_rate=CosineDecay(0.001, 10, warmup_target=0.01,
  // warmup_steps=2), weight_decay=0.1): the decay and the step both at the
  // scheduled rate of each update.
  OptimizerConfig config = AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f);
  config.set_weight_decay(0.1f);
  LearningRateSchedule& s = *config.mutable_schedule();
  s.set_decay(LearningRateSchedule::DECAY_COSINE);
  s.set_decay_steps(10);
  s.set_warmup_steps(2);
  s.set_warmup_initial_learning_rate(0.001f);
  std::unique_ptr<Optimizer> adamw = Create(config);
  ASSERT_NE(adamw, nullptr);
  auto after = RunSteps(*adamw, {1.0f, -2.0f, 0.5f}, kGrads);
  ExpectNear(after[0], {0.998899996, -2.00079989, 0.500949979});
  ExpectNear(after[1], {0.996885836, -2.00500798, 0.502875566});
  ExpectNear(after[2], {0.989184022, -2.00888896, 0.501569688});
}

TEST(WeightDecayTest, LazyTableUpdateDecaysOnlyTheTouchedRows) {
  OptimizerConfig config = SgdConfig(0.5f);
  config.set_weight_decay(0.2f);
  std::unique_ptr<Optimizer> lazy = Create(config);
  config.set_table_updates(TABLE_UPDATES_DENSE);
  std::unique_ptr<Optimizer> dense = Create(config);
  ASSERT_NE(lazy, nullptr);
  ASSERT_NE(dense, nullptr);
  const std::vector<int64_t> touched = {1};
  const std::vector<float> grads = {0.0f, 0.0f};
  std::vector<float> scratch;
  std::vector<float> a = {1, 1, 1, 1, 1, 1}, b = a;  // 3 rows of 2
  ApplyTableStep(*lazy, 3, 2, touched, grads, 1, a.data(), {}, &scratch);
  ApplyTableStep(*dense, 3, 2, touched, grads, 1, b.data(), {}, &scratch);
  EXPECT_THAT(a, ::testing::ElementsAre(1, 1, 0.9f, 0.9f, 1, 1));
  EXPECT_THAT(b, ::testing::Each(0.9f));
}

TEST(WeightDecayTest, CreateRejectsBadWeightDecayAndZeroRateFtrl) {
  OptimizerConfig config = SgdConfig(0.1f);
  config.set_weight_decay(-0.1f);
  absl::StatusOr<std::unique_ptr<Optimizer>> bad = CreateOptimizer(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("optimizer.weight_decay"));

  OptimizerConfig ftrl;
  ftrl.set_learning_rate(0.1f);
  ftrl.mutable_ftrl();
  ftrl.mutable_schedule()->set_warmup_steps(10);  // from rate 0
  bad = CreateOptimizer(ftrl);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("optimizer.schedule"));
  ftrl.mutable_schedule()->set_warmup_initial_learning_rate(0.01f);
  EXPECT_TRUE(CreateOptimizer(ftrl).ok());
}

TEST(WeightDecayTest, ScheduleErrorsComeThroughCreateOptimizer) {
  OptimizerConfig config = SgdConfig(0.1f);
  config.mutable_schedule()->set_decay(LearningRateSchedule::DECAY_COSINE);
  absl::StatusOr<std::unique_ptr<Optimizer>> bad = CreateOptimizer(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("optimizer.schedule.decay_steps"));
}

}  // namespace
}  // namespace tessera
