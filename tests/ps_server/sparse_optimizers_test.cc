// Adagrad, FTRL and lazy (row) Adam against updates worked out by hand.
// Expected numbers come from the formulas in the comments, evaluated in
// double precision (Python), then compared with float results.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "common/optimizer/optimizers.h"
#include "ps_server/shard.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// Relative to the magnitude, as FTRL's "linear" slot grows to ~30.
void ExpectNear(const std::vector<float>& actual,
                const std::vector<double>& expected, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i],
                2e-6 * std::max(1.0, std::fabs(expected[i])))
        << what << " element " << i;
  }
}

std::unique_ptr<Optimizer> Create(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(config);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return optimizer.ok() ? *std::move(optimizer) : nullptr;
}

// Values and slots of one range, slots starting where a shard starts them.
struct State {
  State(const Optimizer& optimizer, std::vector<float> initial)
      : values(std::move(initial)) {
    for (int k = 0; k < optimizer.num_slots(); ++k) {
      slots.emplace_back(values.size(), optimizer.slot_initial_value(k));
    }
    for (auto& slot : slots) ptrs.push_back(slot.data());
  }
  void Step(const Optimizer& optimizer, const std::vector<float>& grad) {
    optimizer.Apply(values.data(), grad.data(), ptrs.data(),
                    static_cast<int64_t>(values.size()), ++t);
  }
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
  std::vector<float*> ptrs;
  int64_t t = 0;
};

OptimizerConfig AdagradConfig(float lr) {
  OptimizerConfig config;
  config.set_learning_rate(lr);
  config.mutable_adagrad();
  return config;
}

TEST(SparseOptimizersTest, AdagradKerasDefaultsTwoSteps) {
  std::unique_ptr<Optimizer> adagrad = Create(AdagradConfig(0.1f));
  ASSERT_NE(adagrad, nullptr);
  EXPECT_EQ(adagrad->name(), "adagrad");
  ASSERT_EQ(adagrad->num_slots(), 1);
  EXPECT_FLOAT_EQ(adagrad->slot_initial_value(0), 0.1f);  // Keras default
  // acc = 0.1 + g^2; w -= 0.1 * g / (sqrt(acc) + 1e-7).
  // Step 1, g = [0.5, -1, 0]: acc = [0.35, 1.1, 0.1];
  //   w0 = 1 - 0.05 / 0.5916080 = 0.9154846,
  //   w1 = -2 + 0.1 / 1.0488088 = -1.9046538, w2 unchanged.
  // Step 2, g = [1, 2, -0.25]: acc = [1.35, 5.1, 0.1625];
  //   w0 = 0.9154846 - 0.1 / 1.1618950 = 0.8294183,
  //   w1 = -1.9046538 - 0.2 / 2.2583180 = -1.9932152,
  //   w2 = 0.5 + 0.025 / 0.4031129 = 0.5620174.
  State s(*adagrad, {1.0f, -2.0f, 0.5f});
  s.Step(*adagrad, {0.5f, -1.0f, 0.0f});
  ExpectNear(s.values, {0.9154846, -1.9046538, 0.5}, "step 1");
  ExpectNear(s.slots[0], {0.35, 1.1, 0.1}, "accumulator 1");
  s.Step(*adagrad, {1.0f, 2.0f, -0.25f});
  ExpectNear(s.values, {0.8294183, -1.9932152, 0.5620174}, "step 2");
  ExpectNear(s.slots[0], {1.35, 5.1, 0.1625}, "accumulator 2");
}

TEST(SparseOptimizersTest, AdagradExplicitOptions) {
  OptimizerConfig config = AdagradConfig(1.0f);
  config.mutable_adagrad()->set_initial_accumulator_value(0.0f);
  config.mutable_adagrad()->set_epsilon(1.0f);
  std::unique_ptr<Optimizer> adagrad = Create(config);
  ASSERT_NE(adagrad, nullptr);
  // acc = 0 + 9 = 9; w = 1 - 1 * 3 / (3 + 1) = 0.25.
  State s(*adagrad, {1.0f});
  s.Step(*adagrad, {3.0f});
  ExpectNear(s.values, {0.25}, "w");
}

OptimizerConfig FtrlConfig(float lr, float l1, float l2, float l2_shrinkage,
                           float beta) {
  OptimizerConfig config;
  config.set_learning_rate(lr);
  FtrlOptions* f = config.mutable_ftrl();
  f->set_l1(l1);
  f->set_l2(l2);
  f->set_l2_shrinkage(l2_shrinkage);
  f->set_beta(beta);
  return config;
}

TEST(SparseOptimizersTest, FtrlWithL1AndL2TwoSteps) {
  std::unique_ptr<Optimizer> ftrl =
      Create(FtrlConfig(0.1f, 0.01f, 0.1f, 0.0f, 0.0f));
  ASSERT_NE(ftrl, nullptr);
  EXPECT_EQ(ftrl->name(), "ftrl");
  ASSERT_EQ(ftrl->num_slots(), 2);
  EXPECT_FLOAT_EQ(ftrl->slot_initial_value(0), 0.1f);
  EXPECT_FLOAT_EQ(ftrl->slot_initial_value(1), 0.0f);
  // TF ApplyFtrlV2 with lr_power -0.5. Element 0, step 1 (w = 1, g = 0.5,
  // acc = 0.1): acc' = 0.35;
  //   linear = 0.5 - (sqrt(0.35) - sqrt(0.1)) / 0.1 * 1 = -2.2538021;
  //   |linear| > l1, so w = (0.01 * -1 + 2.2538021) /
  //                         (sqrt(0.35) / 0.1 + 2 * 0.1) = 0.3668693.
  // Element 2 (g = 0.001) ends with linear = 0.0009921 <= l1: w = 0.
  State s(*ftrl, {1.0f, -2.0f, 0.5f});
  s.Step(*ftrl, {0.5f, -1.0f, 0.001f});
  ExpectNear(s.values, {0.3668693, -1.2763388, 0.0}, "step 1");
  ExpectNear(s.slots[1], {-2.2538021, 13.6516216, 0.0009921}, "linear 1");
  ExpectNear(s.slots[0], {0.35, 1.1, 0.100001}, "accumulator 1");
  s.Step(*ftrl, {1.0f, 2.0f, -0.25f});
  ExpectNear(s.values, {0.2822595, -1.3641228, 0.0564878}, "step 2");
  ExpectNear(s.slots[1], {-3.3460103, 31.0890553, -0.2490079}, "linear 2");
}

TEST(SparseOptimizersTest, FtrlWithShrinkageAndBeta) {
  // l2_shrinkage 0.05 adds 2 * 0.05 * w to the gradient fed to `linear`;
  // beta 0.5 adds 0.5 / (2 * 0.1) = 2.5 to l2.
  std::unique_ptr<Optimizer> ftrl =
      Create(FtrlConfig(0.1f, 0.0f, 0.0f, 0.05f, 0.5f));
  ASSERT_NE(ftrl, nullptr);
  State s(*ftrl, {1.0f, -2.0f, 0.5f});
  s.Step(*ftrl, {0.5f, -1.0f, 0.001f});
  ExpectNear(s.values, {0.1973055, -0.8685140, -0.0062473}, "step 1");
  s.Step(*ftrl, {1.0f, 2.0f, -0.25f});
  ExpectNear(s.values, {0.1359460, -0.9378732, 0.0215039}, "step 2");
  ExpectNear(s.slots[1], {-2.2592790, 25.8695262, -0.1942047}, "linear 2");
}

TEST(SparseOptimizersTest, FtrlOtherLearningRatePower) {
  OptimizerConfig config = FtrlConfig(0.1f, 0.0f, 0.0f, 0.0f, 0.0f);
  config.mutable_ftrl()->set_learning_rate_power(-1.0f);
  std::unique_ptr<Optimizer> ftrl = Create(config);
  ASSERT_NE(ftrl, nullptr);
  // Power -1: acc'^1 replaces sqrt(acc'). Element 0, step 1:
  //   linear = 0.5 - (0.35 - 0.1) / 0.1 = -2; w = 2 / (0.35 / 0.1) = 0.5714286.
  State s(*ftrl, {1.0f, -2.0f, 0.5f});
  s.Step(*ftrl, {0.5f, -1.0f, 0.001f});
  ExpectNear(s.values, {0.5714286, -1.7272727, -0.0009950}, "step 1");
  s.Step(*ftrl, {1.0f, 2.0f, -0.25f});
  ExpectNear(s.values, {0.4973545, -1.7664884, 0.1528502}, "step 2");
}

TEST(SparseOptimizersTest, BadOptionsAreRefusedNamingTheField) {
  struct Case {
    OptimizerConfig config;
    const char* field;
  };
  std::vector<Case> cases;
  {
    OptimizerConfig c = AdagradConfig(0.1f);
    c.mutable_adagrad()->set_initial_accumulator_value(-1.0f);
    cases.push_back({c, "initial_accumulator_value"});
    c = AdagradConfig(0.1f);
    c.mutable_adagrad()->set_epsilon(NAN);
    cases.push_back({c, "epsilon"});
    c = FtrlConfig(0.1f, -0.5f, 0, 0, 0);
    cases.push_back({c, "l1"});
    c = FtrlConfig(0.1f, 0, 0, 0, -1.0f);
    cases.push_back({c, "beta"});
    c = FtrlConfig(0.1f, 0, 0, 0, 0);
    c.mutable_ftrl()->set_learning_rate_power(0.5f);
    cases.push_back({c, "learning_rate_power"});
    c = FtrlConfig(0.1f, 0, 0, 0, 0);
    c.mutable_ftrl()->set_initial_accumulator_value(-0.1f);
    cases.push_back({c, "initial_accumulator_value"});
    c = FtrlConfig(0.1f, 0, 0, 0, 0);
    c.mutable_ftrl()->set_learning_rate_power(-INFINITY);
    cases.push_back({c, "learning_rate_power"});
    // An empty accumulator with neither l2 nor beta divides by zero.
    c = FtrlConfig(0.1f, 0, 0, 0.05f, 0);
    c.mutable_ftrl()->set_initial_accumulator_value(0.0f);
    cases.push_back({c, "initial_accumulator_value 0 needs l2 > 0 or beta"});
  }
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
        CreateOptimizer(c.config);
    EXPECT_EQ(optimizer.status().code(), absl::StatusCode::kInvalidArgument)
        << c.field;
    EXPECT_THAT(optimizer.status().message(), HasSubstr(c.field));
  }
}

// A fixed shard starts Adagrad's and FTRL's accumulators at their initial
// value, not at zero.
TEST(SparseOptimizersTest, ShardSlotsStartAtTheInitialAccumulator) {
  std::unique_ptr<Optimizer> adagrad = Create(AdagradConfig(0.1f));
  ASSERT_NE(adagrad, nullptr);
  ShardDef def = ps_test::MakeShardDef("emb", 0, {2, 3}, 0, 2,
                                       ps_test::ConstantInit(1.0f));
  absl::StatusOr<std::unique_ptr<Shard>> shard =
      Shard::Create(def, adagrad.get());
  ASSERT_TRUE(shard.ok()) << shard.status();
  // Row 1 only: acc = 0.1 + 4 = 4.1; w = 1 - 0.1 * 2 / sqrt(4.1).
  const std::vector<int64_t> rows = {1};
  const std::vector<float> grad = {2.0f, 2.0f, 2.0f};
  (*shard)->ApplyRows(rows, grad);
  std::vector<float> out(6);
  (*shard)->ReadBytes(0, 24, reinterpret_cast<char*>(out.data()));
  const double w = 1 - 0.2 / std::sqrt(4.1);  // 0.9012270
  ExpectNear(out, {1, 1, 1, w, w, w}, "values");
}

// Row pushes give TF Addons' LazyAdam: only the pushed rows' m and v move,
// and the bias correction uses t = the shard's count of updates.
TEST(SparseOptimizersTest, LazyAdamTouchesOnlyPushedRows) {
  std::unique_ptr<Optimizer> adam =
      Create(ps_test::AdamConfig(0.1f, 0.9f, 0.999f, 1e-7f));
  ASSERT_NE(adam, nullptr);
  ShardDef def =
      ps_test::MakeShardDef("emb", 0, {2, 2}, 0, 2, ps_test::ZerosInit());
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(def, adam.get());
  ASSERT_TRUE(shard.ok()) << shard.status();
  // Both rows start at zero. lr_t = 0.1 * sqrt(1 - 0.999^t) / (1 - 0.9^t).
  // t=1, row 1, g = [0.5, -1]: m = [0.05, -0.1], v = [0.00025, 0.001];
  //   lr_t = 0.0316228, m / sqrt(v) = [3.1623, -3.1623] -> w = [-0.1, 0.1].
  // t=2, row 1, g = [1, 1]: m = [0.145, 0.01], v = [0.00124975, 0.001999];
  //   lr_t = 0.1 * 0.0447102 / 0.19 = 0.0235317;
  //   w = [-0.1 - 0.0235317 * 0.145 / 0.0353518,
  //        0.1 - 0.0235317 * 0.01 / 0.0447102] = [-0.1965173, 0.0947365].
  // t=3, row 0, g = [2, -2]: first update of row 0 but t = 3:
  //   m = [0.2, -0.2], v = [0.004, 0.004], lr_t = 0.1 * 0.0547449 / 0.271
  //   = 0.0202011; w0 = -/+ 0.0202011 * 0.2 / 0.0632456 = -/+0.0638813.
  const std::vector<int64_t> row1 = {1}, row0 = {0};
  (*shard)->ApplyRows(row1, std::vector<float>{0.5f, -1.0f});
  (*shard)->ApplyRows(row1, std::vector<float>{1.0f, 1.0f});
  std::vector<float> out(4);
  (*shard)->ReadBytes(0, 16, reinterpret_cast<char*>(out.data()));
  ExpectNear(out, {0, 0, -0.1965173, 0.0947365}, "after two pushes of row 1");
  (*shard)->ApplyRows(row0, std::vector<float>{2.0f, -2.0f});
  (*shard)->ReadBytes(0, 16, reinterpret_cast<char*>(out.data()));
  ExpectNear(out, {-0.0638813, 0.0638813, -0.1965173, 0.0947365},
             "after row 0");
}

}  // namespace
}  // namespace tessera
