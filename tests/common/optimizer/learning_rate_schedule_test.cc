#include "common/optimizer/learning_rate_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/job.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// (Keras' step k = optimizer.iterations, Keras' rate at k). The rates are
// Keras 3.15.1's own (keras.optimizers.schedules, float32), printed with
//   float(schedule(k))
// for the schedule each test names; Tessera's update t runs at Keras' step
// t - 1.
using KerasRates = std::vector<std::pair<int64_t, double>>;

OptimizerConfig WithSchedule(float learning_rate,
                             LearningRateSchedule::Decay decay) {
  OptimizerConfig config;
  config.set_learning_rate(learning_rate);
  config.mutable_adam();
  config.mutable_schedule()->set_decay(decay);
  return config;
}

void ExpectKerasRates(const OptimizerConfig& config, const KerasRates& keras) {
  absl::StatusOr<LearningRate> rate = LearningRate::Create(config);
  ASSERT_TRUE(rate.ok()) << rate.status();
  for (const auto& [k, expected] : keras) {
    // Keras computes in float32: a few ulps apart from our double.
    EXPECT_NEAR(rate->Rate(k + 1), expected, 1e-6 * expected + 1e-9)
        << "Keras step " << k;
  }
}

TEST(LearningRateScheduleTest, UnsetIsTheLearningRateOnEveryUpdate) {
  OptimizerConfig config;
  config.set_learning_rate(0.125f);
  absl::StatusOr<LearningRate> rate = LearningRate::Create(config);
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_TRUE(rate->constant());
  for (int64_t t : {1, 2, 1000, 1 << 30}) EXPECT_EQ(rate->Rate(t), 0.125f);
}

TEST(LearningRateScheduleTest, ExponentialDecayIsKeras) {
  // ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
  OptimizerConfig config =
      WithSchedule(0.1f, LearningRateSchedule::DECAY_EXPONENTIAL);
  config.mutable_schedule()->set_decay_steps(10);
  config.mutable_schedule()->set_decay_rate(0.5f);
  ExpectKerasRates(config, {{0, 0.100000001},
                            {1, 0.0933033004},
                            {5, 0.0707106814},
                            {10, 0.0500000007},
                            {15, 0.0353553407},
                            {37, 0.00769465277}});
  // The same with staircase=True.
  config.mutable_schedule()->set_staircase(true);
  ExpectKerasRates(config, {{0, 0.100000001},
                            {1, 0.100000001},
                            {5, 0.100000001},
                            {10, 0.0500000007},
                            {15, 0.0500000007},
                            {37, 0.0125000002}});
}

TEST(LearningRateScheduleTest, PiecewiseConstantDecayIsKeras) {
  // PiecewiseConstantDecay([5, 12], [0.1, 0.05, 0.01]): a boundary step
  // still has the rate before it.
  OptimizerConfig config =
      WithSchedule(0.0f, LearningRateSchedule::DECAY_PIECEWISE);
  for (int64_t b : {5, 12}) config.mutable_schedule()->add_boundaries(b);
  for (float v : {0.1f, 0.05f, 0.01f}) config.mutable_schedule()->add_values(v);
  ExpectKerasRates(config, {{0, 0.100000001},
                            {5, 0.100000001},
                            {6, 0.0500000007},
                            {12, 0.0500000007},
                            {13, 0.00999999978},
                            {100, 0.00999999978}});
}

TEST(LearningRateScheduleTest, CosineDecayIsKeras) {
  // CosineDecay(0.1, decay_steps=20, alpha=0.1)
  OptimizerConfig config =
      WithSchedule(0.1f, LearningRateSchedule::DECAY_COSINE);
  config.mutable_schedule()->set_decay_steps(20);
  config.mutable_schedule()->set_alpha(0.1f);
  ExpectKerasRates(config, {{0, 0.100000001},
                            {1, 0.0994459763},
                            {10, 0.054999996},
                            {19, 0.010554024},
                            {20, 0.0100000007},
                            {50, 0.0100000007}});
}

TEST(LearningRateScheduleTest, CosineDecayWithWarmupIsKeras) {
  // CosineDecay(0.0, decay_steps=20, alpha=0.0, warmup_target=0.2,
  // warmup_steps=5): learning_rate is the warm-up's target.
  OptimizerConfig config =
      WithSchedule(0.2f, LearningRateSchedule::DECAY_COSINE);
  config.mutable_schedule()->set_decay_steps(20);
  config.mutable_schedule()->set_warmup_steps(5);
  ExpectKerasRates(config, {{0, 0},
                            {1, 0.0400000028},
                            {4, 0.160000011},
                            {5, 0.200000003},
                            {6, 0.198768839},
                            {15, 0.099999994},
                            {25, 0},
                            {40, 0}});
  // CosineDecay(0.02, 20, alpha=0.05, warmup_target=0.2, warmup_steps=4)
  config.mutable_schedule()->set_warmup_steps(4);
  config.mutable_schedule()->set_warmup_initial_learning_rate(0.02f);
  config.mutable_schedule()->set_alpha(0.05f);
  ExpectKerasRates(config, {{0, 0.0199999996},
                            {2, 0.109999999},
                            {4, 0.200000003},
                            {9, 0.172175154},
                            {30, 0.0100000007}});
}

TEST(LearningRateScheduleTest, PolynomialDecayIsKeras) {
  // PolynomialDecay(0.1, 20, end_learning_rate=0.01, power=2.0)
  OptimizerConfig config =
      WithSchedule(0.1f, LearningRateSchedule::DECAY_POLYNOMIAL);
  config.mutable_schedule()->set_decay_steps(20);
  config.mutable_schedule()->set_end_learning_rate(0.01f);
  config.mutable_schedule()->set_power(2.0f);
  ExpectKerasRates(config, {{0, 0.100000001},
                            {1, 0.0912249982},
                            {10, 0.0324999988},
                            {20, 0.00999999978},
                            {30, 0.00999999978}});
  // PolynomialDecay(0.1, 10, end_learning_rate=0.001, power=0.5,
  // cycle=True)
  config.mutable_schedule()->set_decay_steps(10);
  config.mutable_schedule()->set_end_learning_rate(0.001f);
  config.mutable_schedule()->set_power(0.5f);
  config.mutable_schedule()->set_cycle(true);
  ExpectKerasRates(config, {{0, 0.100000001},
                            {1, 0.0949196443},
                            {10, 0.00100000005},
                            {11, 0.0674112141},
                            {25, 0.0414165817}});
}

TEST(LearningRateScheduleTest, UnsetPowerIsKerasLinearDecay) {
  OptimizerConfig config =
      WithSchedule(1.0f, LearningRateSchedule::DECAY_POLYNOMIAL);
  config.mutable_schedule()->set_decay_steps(4);
  // (1 - 0) * (1 - k / 4) + 0
  ExpectKerasRates(config, {{0, 1.0}, {1, 0.75}, {2, 0.5}, {4, 0}, {9, 0}});
}

TEST(LearningRateScheduleTest, MlperfDlrmWarmupHoldThenPolynomialDecay) {
  // The MLPerf DLRM reference: a linear warm-up from 0 over W steps, the
  // peak until decay_start, then (peak) * (1 - s / D)^2 down to 0.
  OptimizerConfig config =
      WithSchedule(2.0f, LearningRateSchedule::DECAY_POLYNOMIAL);
  LearningRateSchedule& s = *config.mutable_schedule();
  s.set_warmup_steps(4);
  s.set_hold_steps(2);
  s.set_decay_steps(10);
  s.set_power(2.0f);
  ExpectKerasRates(config, {{0, 0.0},
                            {1, 0.5},
                            {3, 1.5},
                            {4, 2.0},  // warm-up done
                            {5, 2.0},  // the hold
                            {6, 2.0},  // decay step 0
                            {7, 2.0 * 0.81},
                            {11, 2.0 * 0.25},
                            {16, 0.0},
                            {100, 0.0}});
}

TEST(LearningRateScheduleTest, WarmupCombinesWithEveryDecay) {
  // Exponential: the warm-up climbs to the peak, the decay starts there.
  OptimizerConfig config =
      WithSchedule(1.0f, LearningRateSchedule::DECAY_EXPONENTIAL);
  config.mutable_schedule()->set_warmup_steps(2);
  config.mutable_schedule()->set_decay_steps(1);
  config.mutable_schedule()->set_decay_rate(0.5f);
  ExpectKerasRates(config,
                   {{0, 0.0}, {1, 0.5}, {2, 1.0}, {3, 0.5}, {5, 0.125}});
  // Piecewise: the warm-up climbs to values[0].
  OptimizerConfig piecewise =
      WithSchedule(0.0f, LearningRateSchedule::DECAY_PIECEWISE);
  piecewise.mutable_schedule()->set_warmup_steps(4);
  piecewise.mutable_schedule()->add_boundaries(1);
  piecewise.mutable_schedule()->add_values(0.8f);
  piecewise.mutable_schedule()->add_values(0.1f);
  ExpectKerasRates(piecewise,
                   {{0, 0.0}, {2, 0.4}, {4, 0.8}, {5, 0.8}, {6, 0.1}});
  // Constant: a warm-up alone.
  OptimizerConfig constant =
      WithSchedule(1.0f, LearningRateSchedule::DECAY_CONSTANT);
  constant.mutable_schedule()->set_warmup_steps(10);
  absl::StatusOr<LearningRate> rate = LearningRate::Create(constant);
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_FALSE(rate->constant());
  ExpectKerasRates(constant, {{0, 0.0}, {5, 0.5}, {10, 1.0}, {1000, 1.0}});
}

TEST(LearningRateScheduleTest, RateIsTheSameFromEveryThreadAndCopy) {
  // Rate() keeps its last answer per thread: two schedules asked in turn
  // must not see each other's.
  OptimizerConfig a = WithSchedule(1.0f, LearningRateSchedule::DECAY_COSINE);
  a.mutable_schedule()->set_decay_steps(10);
  OptimizerConfig b = a;
  b.set_learning_rate(3.0f);
  absl::StatusOr<LearningRate> ra = LearningRate::Create(a);
  absl::StatusOr<LearningRate> rb = LearningRate::Create(b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  for (int64_t t = 1; t <= 12; ++t) {
    const float x = ra->Rate(t), y = rb->Rate(t);
    EXPECT_FLOAT_EQ(y, 3.0f * x) << "update " << t;
    EXPECT_EQ(ra->Rate(t), x);
  }
}

TEST(LearningRateScheduleTest, LinearScalingScalesEveryRateButTheWarmupStart) {
  OptimizerConfig config =
      WithSchedule(0.1f, LearningRateSchedule::DECAY_POLYNOMIAL);
  config.mutable_schedule()->set_decay_steps(10);
  config.mutable_schedule()->set_end_learning_rate(0.01f);
  config.mutable_schedule()->set_warmup_steps(5);
  config.mutable_schedule()->set_warmup_initial_learning_rate(0.1f);
  ScaleLearningRate(4.0, &config);
  EXPECT_FLOAT_EQ(config.learning_rate(), 0.4f);
  EXPECT_FLOAT_EQ(config.schedule().end_learning_rate(), 0.04f);
  // Goyal et al.'s gradual warm-up: from the unscaled rate to the scaled.
  EXPECT_FLOAT_EQ(config.schedule().warmup_initial_learning_rate(), 0.1f);

  OptimizerConfig plain;
  plain.set_learning_rate(0.5f);
  ScaleLearningRate(2.0, &plain);
  EXPECT_FLOAT_EQ(plain.learning_rate(), 1.0f);
  EXPECT_FALSE(plain.has_schedule());
}

TEST(LearningRateScheduleTest, ErrorsNameTheBadField) {
  struct Case {
    LearningRateSchedule schedule;
    const char* field;
  };
  std::vector<Case> cases;
  auto add = [&](const char* field, auto set) {
    LearningRateSchedule s;
    set(s);
    cases.push_back({s, field});
  };
  add("schedule.decay_steps", [](LearningRateSchedule& s) {
    s.set_decay(LearningRateSchedule::DECAY_COSINE);
  });
  add("schedule.decay_rate", [](LearningRateSchedule& s) {
    s.set_decay(LearningRateSchedule::DECAY_EXPONENTIAL);
    s.set_decay_steps(5);
  });
  add("schedule.decay_rate", [](LearningRateSchedule& s) {
    s.set_decay(LearningRateSchedule::DECAY_COSINE);
    s.set_decay_steps(5);
    s.set_decay_rate(0.5f);  // read by exponential only
  });
  add("schedule.values", [](LearningRateSchedule& s) {
    s.set_decay(LearningRateSchedule::DECAY_PIECEWISE);
    s.add_boundaries(3);
    s.add_values(0.1f);
  });
  add("schedule.boundaries[1]", [](LearningRateSchedule& s) {
    s.set_decay(LearningRateSchedule::DECAY_PIECEWISE);
    s.add_boundaries(3);
    s.add_boundaries(3);
    for (int i = 0; i < 3; ++i) s.add_values(0.1f);
  });
  add("schedule.values[1]", [](LearningRateSchedule& s) {
    s.set_decay(LearningRateSchedule::DECAY_PIECEWISE);
    s.add_boundaries(3);
    s.add_values(0.1f);
    s.add_values(-1.0f);
  });
  add("schedule.alpha", [](LearningRateSchedule& s) {
    s.set_decay(LearningRateSchedule::DECAY_COSINE);
    s.set_decay_steps(5);
    s.set_alpha(1.5f);
  });
  add("schedule.power", [](LearningRateSchedule& s) {
    s.set_decay(LearningRateSchedule::DECAY_POLYNOMIAL);
    s.set_decay_steps(5);
    s.set_power(0.0f);
  });
  add("schedule.warmup_steps",
      [](LearningRateSchedule& s) { s.set_warmup_steps(-1); });
  add("schedule.hold_steps",
      [](LearningRateSchedule& s) { s.set_hold_steps(-1); });
  add("schedule.warmup_initial_learning_rate", [](LearningRateSchedule& s) {
    s.set_warmup_initial_learning_rate(0.1f);  // without warmup_steps
  });
  add("schedule.decay", [](LearningRateSchedule& s) {
    s.set_decay(static_cast<LearningRateSchedule::Decay>(77));
  });
  for (const Case& c : cases) {
    OptimizerConfig config;
    config.set_learning_rate(0.1f);
    *config.mutable_schedule() = c.schedule;
    absl::StatusOr<LearningRate> rate =
        LearningRate::Create(config, "embedding_optimizer");
    ASSERT_FALSE(rate.ok()) << c.field;
    EXPECT_EQ(rate.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(rate.status().message(),
                HasSubstr(std::string("embedding_optimizer.") + c.field));
  }
}

TEST(LearningRateScheduleTest, ParsesTheFlagsText) {
  absl::StatusOr<LearningRateSchedule> s = ParseLearningRateSchedule(
      "polynomial,warmup_steps=100,warmup_initial_learning_rate=0.001,"
      "hold_steps=50,decay_steps=1000,end_learning_rate=0,power=2,cycle");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->decay(), LearningRateSchedule::DECAY_POLYNOMIAL);
  EXPECT_EQ(s->warmup_steps(), 100);
  EXPECT_FLOAT_EQ(s->warmup_initial_learning_rate(), 0.001f);
  EXPECT_EQ(s->hold_steps(), 50);
  EXPECT_EQ(s->decay_steps(), 1000);
  EXPECT_TRUE(s->has_power());
  EXPECT_FLOAT_EQ(s->power(), 2.0f);
  EXPECT_TRUE(s->cycle());

  s = ParseLearningRateSchedule(
      "piecewise,boundaries=1000:5000,values=0.1:0.01:0.001");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->boundaries(), ::testing::ElementsAre(1000, 5000));
  EXPECT_THAT(s->values(), ::testing::ElementsAre(0.1f, 0.01f, 0.001f));

  s = ParseLearningRateSchedule(
      "exponential,decay_steps=10,decay_rate=0.9,"
      "staircase=false");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->staircase());
  EXPECT_FLOAT_EQ(s->decay_rate(), 0.9f);

  for (const auto& [spec, says] :
       std::vector<std::pair<const char*, const char*>>{
           {"linear", "\"linear\" is not a decay"},
           {"cosine,decay_steps=ten", "decay_steps must be an integer"},
           {"cosine,alpha=x", "alpha must be a number"},
           {"cosine,warmup=5", "\"warmup=5\": unknown key"},
           {"polynomial,cycle=maybe", "cycle must be true or false"},
           {"piecewise,boundaries=1:b", "boundaries must be steps"}}) {
    s = ParseLearningRateSchedule(spec);
    ASSERT_FALSE(s.ok()) << spec;
    EXPECT_THAT(s.status().message(), HasSubstr(says)) << spec;
  }
}

}  // namespace
}  // namespace tessera
