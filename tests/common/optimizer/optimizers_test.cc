#include "common/optimizer/optimizers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "tests/common/optimizer/optimizer_configs.h"

namespace tessera {
namespace {

using optimizer_test::AdamConfig;
using optimizer_test::MomentumConfig;
using optimizer_test::SgdConfig;
using ::testing::HasSubstr;

constexpr double kTolerance = 1e-6;

// Runs `optimizer` over `values` with the given successive gradients, the
// slots starting at zero as in a fresh shard, and returns the values after
// each step.
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
    EXPECT_NEAR(actual[i], expected[i], kTolerance) << "element " << i;
  }
}

std::unique_ptr<Optimizer> Create(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(config);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return optimizer.ok() ? *std::move(optimizer) : nullptr;
}

TEST(OptimizersTest, SgdTwoSteps) {
  std::unique_ptr<Optimizer> sgd = Create(SgdConfig(0.1f));
  ASSERT_NE(sgd, nullptr);
  EXPECT_EQ(sgd->name(), "sgd");
  EXPECT_EQ(sgd->num_slots(), 0);
  // w -= 0.1 * g.
  auto after = RunSteps(*sgd, {1.0f, -2.0f, 0.5f},
                        {{0.5f, 1.0f, -2.0f}, {1.0f, 1.0f, 1.0f}});
  ExpectNear(after[0], {0.95, -2.1, 0.7});
  ExpectNear(after[1], {0.85, -2.2, 0.6});
}

TEST(OptimizersTest, MomentumTwoSteps) {
  std::unique_ptr<Optimizer> momentum =
      Create(MomentumConfig(0.1f, 0.9f, false));
  ASSERT_NE(momentum, nullptr);
  EXPECT_EQ(momentum->num_slots(), 1);
  // Keras: v = 0.9 v - 0.1 g; w += v.
  // Step 1: v = [-0.05, -0.1],            w = [0.95, -2.1].
  // Step 2: v = [-0.045 - 0.1, -0.09 + 0.1] = [-0.145, 0.01],
  //         w = [0.805, -2.09].
  auto after =
      RunSteps(*momentum, {1.0f, -2.0f}, {{0.5f, 1.0f}, {1.0f, -1.0f}});
  ExpectNear(after[0], {0.95, -2.1});
  ExpectNear(after[1], {0.805, -2.09});
}

TEST(OptimizersTest, NesterovMomentumTwoSteps) {
  std::unique_ptr<Optimizer> nesterov =
      Create(MomentumConfig(0.1f, 0.9f, true));
  ASSERT_NE(nesterov, nullptr);
  // Keras: v = 0.9 v - 0.1 g; w += 0.9 v - 0.1 g (with the new v).
  // Step 1: v = [-0.05, -0.1], w += [-0.045 - 0.05, -0.09 - 0.1]
  //         = [-0.095, -0.19] -> w = [0.905, -2.19].
  // Step 2: v = [-0.145, 0.01], w += [-0.1305 - 0.1, 0.009 + 0.1]
  //         = [-0.2305, 0.109] -> w = [0.6745, -2.081].
  auto after =
      RunSteps(*nesterov, {1.0f, -2.0f}, {{0.5f, 1.0f}, {1.0f, -1.0f}});
  ExpectNear(after[0], {0.905, -2.19});
  ExpectNear(after[1], {0.6745, -2.081});
}

TEST(OptimizersTest, MomentumZeroIsPlainSgd) {
  std::unique_ptr<Optimizer> momentum =
      Create(MomentumConfig(0.1f, 0.0f, false));
  ASSERT_NE(momentum, nullptr);
  auto after = RunSteps(*momentum, {1.0f}, {{0.5f}, {1.0f}});
  ExpectNear(after[0], {0.95});
  ExpectNear(after[1], {0.85});
}

TEST(OptimizersTest, AdamTwoStepsKerasDefaults) {
  std::unique_ptr<Optimizer> adam =
      Create(AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f));
  ASSERT_NE(adam, nullptr);
  EXPECT_EQ(adam->name(), "adam");
  EXPECT_EQ(adam->num_slots(), 2);
  // lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t); m = b1 m + (1 - b1) g;
  // v = b2 v + (1 - b2) g^2; w -= lr_t * m / (sqrt(v) + eps).
  // Step 1: lr_t = 0.00316227766, m = 0.1 g, v = 0.001 g^2.
  // Step 2: lr_t = 0.00235316725, m = [0.029, -0.008, 0.17],
  //         v = [4.999e-5, 4.996e-5, 9.991e-3].
  auto after = RunSteps(*adam, {1.0f, -2.0f, 0.5f},
                        {{0.1f, -0.2f, 3.0f}, {0.2f, 0.1f, -1.0f}});
  ExpectNear(after[0], {0.990000316, -1.990000158, 0.490000011});
  ExpectNear(after[1], {0.980348632, -1.987336825, 0.485997829});
}

TEST(OptimizersTest, AdamEpsilonIsOutsideTheSquareRoot) {
  // A large epsilon makes its placement visible: with eps inside the root
  // the first step would be 0.1 * 0.005 / sqrt(0.500025) = 7.07e-4, not
  // 0.1 * 0.005 / (0.005 + 0.5) = 9.90e-4.
  std::unique_ptr<Optimizer> adam = Create(AdamConfig(0.1f, 0.5f, 0.75f, 0.5f));
  ASSERT_NE(adam, nullptr);
  // Step 1: lr_t = 0.1, m = [0.005, -0.01], v = [2.5e-5, 1e-4].
  // Step 2: lr_t = 0.1 * sqrt(0.4375) / 0.75 = 0.0881917104,
  //         m = [0.0175, 0], v = [2.4375e-4, 1e-4]: the second element,
  //         whose m is 0, does not move.
  auto after =
      RunSteps(*adam, {1.0f, -2.0f}, {{0.01f, -0.02f}, {0.03f, 0.01f}});
  ExpectNear(after[0], {0.999009901, -1.998039216});
  ExpectNear(after[1], {0.996016655, -1.998039216});
}

// Expects CreateOptimizer(config) to fail with InvalidArgument naming
// `field`.
void ExpectRejected(const OptimizerConfig& config, const std::string& field) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(config);
  ASSERT_FALSE(optimizer.ok()) << config.DebugString();
  EXPECT_EQ(optimizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(optimizer.status().message(), HasSubstr(field));
}

TEST(OptimizersTest, CreateRejectsMissingKind) {
  OptimizerConfig config;
  config.set_learning_rate(0.1f);
  ExpectRejected(config, "kind");
}

TEST(OptimizersTest, CreateRejectsBadLearningRate) {
  ExpectRejected(SgdConfig(0.0f), "learning_rate");
  ExpectRejected(SgdConfig(-0.5f), "learning_rate");
  ExpectRejected(AdamConfig(0.0f, 0.9f, 0.999f, 1e-7f), "learning_rate");
  ExpectRejected(SgdConfig(std::numeric_limits<float>::quiet_NaN()),
                 "learning_rate");
  ExpectRejected(SgdConfig(std::numeric_limits<float>::infinity()),
                 "learning_rate");
}

TEST(OptimizersTest, CreateRejectsBadMomentum) {
  ExpectRejected(MomentumConfig(0.1f, 1.0f, false), "momentum.momentum");
  ExpectRejected(MomentumConfig(0.1f, -0.1f, true), "momentum.momentum");
}

TEST(OptimizersTest, CreateRejectsBadAdamOptions) {
  ExpectRejected(AdamConfig(0.1f, 1.0f, 0.999f, 1e-7f), "beta1");
  ExpectRejected(AdamConfig(0.1f, -0.1f, 0.999f, 1e-7f), "beta1");
  ExpectRejected(AdamConfig(0.1f, 0.9f, 1.0f, 1e-7f), "beta2");
  ExpectRejected(AdamConfig(0.1f, 0.9f, 0.999f, 0.0f), "epsilon");
}

TEST(MovingAverageOptimizerTest, MovesTowardsThePushedValue) {
  OptimizerConfig config;
  config.mutable_moving_average()->set_momentum(0.9f);
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  ASSERT_TRUE(opt.ok()) << opt.status();
  float values[2] = {1.0f, 0.0f};
  const float pushed[2] = {3.0f, -1.0f};
  (*opt)->Apply(values, pushed, nullptr, 2, 1);
  EXPECT_FLOAT_EQ(values[0], 0.9f * 1.0f + 0.1f * 3.0f);
  EXPECT_FLOAT_EQ(values[1], -0.1f);
  config.mutable_moving_average()->set_momentum(1.0f);
  EXPECT_FALSE(CreateOptimizer(config).ok());
}

// n values spread over [-scale * period / 2, scale * period / 2], in an
// order that strides through them, plus `shift`: inputs whose elements
// differ enough for a wrong lane or tail to show.
std::vector<float> SpreadValues(int64_t n, float scale, int64_t stride,
                                int64_t period, float shift) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    out[i] =
        scale * static_cast<float>((i * stride) % period - period / 2) + shift;
  }
  return out;
}

// An element's update must not depend on where a shard's boundaries put
// it (a checkpoint restored onto other shard sizes continues its twin bit
// for bit): one call over 1003 elements equals calls over pieces of odd
// sizes, for Adam and Adagrad.
TEST(OptimizersTest, AdamAndAdagradBitsDoNotDependOnShardBoundaries) {
  const int64_t n = 1003;
  std::vector<float> w = SpreadValues(n, 0.01f, 37, 101, 0.0f);
  std::vector<float> g = SpreadValues(n, 0.003f, 53, 97, 1e-4f);
  OptimizerConfig adagrad_config;
  adagrad_config.set_learning_rate(0.1f);
  adagrad_config.mutable_adagrad();
  for (const OptimizerConfig& config :
       {AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f), adagrad_config}) {
    std::unique_ptr<Optimizer> opt = Create(config);
    ASSERT_NE(opt, nullptr);
    const int slots = opt->num_slots();
    std::vector<float> whole = w, pieces = w;
    std::vector<std::vector<float>> whole_slots(slots,
                                                std::vector<float>(n, 0.1f));
    std::vector<std::vector<float>> piece_slots = whole_slots;
    for (int64_t t = 1; t <= 3; ++t) {
      std::vector<float*> ptrs;
      for (auto& s : whole_slots) ptrs.push_back(s.data());
      opt->Apply(whole.data(), g.data(), ptrs.data(), n, t);
      for (int64_t begin = 0, size = 1; begin < n; begin += size, size += 2) {
        const int64_t len = std::min(size, n - begin);
        std::vector<float*> at;
        for (auto& s : piece_slots) at.push_back(s.data() + begin);
        opt->Apply(pieces.data() + begin, g.data() + begin, at.data(), len, t);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(whole[i], pieces[i]) << opt->name() << ", element " << i;
    }
  }
}

// Adam and Adagrad run in AVX2 where the CPU has it (optimizer_avx2.h) and
// in the baseline's SIMD elsewhere; either way every element gets exactly
// the bits of the per-element formula (each operation correctly rounded,
// the square root included), over a length with a tail past the last
// full vector.
TEST(OptimizersTest, AdamAndAdagradGiveThePerElementFormulasBits) {
  const int64_t n = 1003;
  std::vector<float> w = SpreadValues(n, 0.01f, 37, 101, 0.0f);
  std::vector<float> g = SpreadValues(n, 0.003f, 53, 97, 0.0f);
  const float lr = 0.01f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-7f;
  std::unique_ptr<Optimizer> adam = Create(AdamConfig(lr, beta1, beta2, eps));
  ASSERT_NE(adam, nullptr);
  std::vector<float> wa = w, m(n, 0.0f), v(n, 0.0f);
  std::vector<float> ws = w, ms(n, 0.0f), vs(n, 0.0f);
  for (int64_t t = 1; t <= 3; ++t) {
    float* slots[] = {m.data(), v.data()};
    adam->Apply(wa.data(), g.data(), slots, n, t);
    const float lr_t = static_cast<float>(
        lr * std::sqrt(1.0 - std::pow(double{beta2}, double(t))) /
        (1.0 - std::pow(double{beta1}, double(t))));
    for (int64_t i = 0; i < n; ++i) {
      ms[i] = beta1 * ms[i] + (1.0f - beta1) * g[i];
      vs[i] = beta2 * vs[i] + (1.0f - beta2) * (g[i] * g[i]);
      ws[i] -= lr_t * ms[i] / (std::sqrt(vs[i]) + eps);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(wa[i], ws[i]) << "Adam, element " << i;
    ASSERT_EQ(m[i], ms[i]) << "Adam m, element " << i;
    ASSERT_EQ(v[i], vs[i]) << "Adam v, element " << i;
  }

  OptimizerConfig config;
  config.set_learning_rate(0.1f);
  config.mutable_adagrad()->set_epsilon(1e-7f);
  std::unique_ptr<Optimizer> adagrad = Create(config);
  ASSERT_NE(adagrad, nullptr);
  std::vector<float> wg = w, acc(n, 0.1f), wr = w, accr(n, 0.1f);
  float* slots[] = {acc.data()};
  adagrad->Apply(wg.data(), g.data(), slots, n, 1);
  for (int64_t i = 0; i < n; ++i) {
    accr[i] += g[i] * g[i];
    wr[i] -= 0.1f * g[i] / (std::sqrt(accr[i]) + 1e-7f);
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(wg[i], wr[i]) << "Adagrad, element " << i;
    ASSERT_EQ(acc[i], accr[i]) << "Adagrad accumulator, element " << i;
  }
}

}  // namespace
}  // namespace tessera
