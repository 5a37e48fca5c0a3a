// ParseOptimizer on optimizers as Keras 3.15 serializes them (the JSON
// below is keras.saving.serialize_keras_object's, trimmed of nothing):
// schedules, weight decay, AdamW and clipping come into the job (#44 item
// 4); what Tessera lacks is refused by name.

#include "tools/keras/keras_compile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace keras {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

OptimizerConfig Parse(const std::string& text) {
  absl::StatusOr<OptimizerConfig> opt = ParseOptimizer(json::parse(text));
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? *opt : OptimizerConfig();
}

TEST(KerasCompileTest, AdamWWithCosineWarmupAndGlobalClipnorm) {
  const OptimizerConfig opt = Parse(R"({"module": "keras.optimizers",
    "class_name": "AdamW", "config": {"name": "adam_w", "learning_rate":
    {"module": "keras.optimizers.schedules", "class_name": "CosineDecay",
    "config": {"initial_learning_rate": 0.0, "decay_steps": 10, "alpha": 0.1,
    "name": "CosineDecay", "warmup_target": 0.01, "warmup_steps": 3},
    "registered_name": null}, "weight_decay": 0.004, "clipnorm": null,
    "global_clipnorm": 1.0, "clipvalue": null, "use_ema": false,
    "ema_momentum": 0.99, "ema_overwrite_frequency": null,
    "loss_scale_factor": null, "gradient_accumulation_steps": null,
    "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07, "amsgrad": false},
    "registered_name": null})");
  ASSERT_TRUE(opt.has_adam());
  EXPECT_FLOAT_EQ(opt.adam().beta2(), 0.999f);
  EXPECT_FLOAT_EQ(opt.weight_decay(), 0.004f);
  EXPECT_FLOAT_EQ(opt.clipping().global_norm(), 1.0f);
  EXPECT_EQ(opt.clipping().norm(), 0.0f);
  // The warm-up's target is the peak; the decay starts after the warm-up.
  EXPECT_FLOAT_EQ(opt.learning_rate(), 0.01f);
  const LearningRateSchedule& s = opt.schedule();
  EXPECT_EQ(s.decay(), LearningRateSchedule::DECAY_COSINE);
  EXPECT_EQ(s.warmup_steps(), 3);
  EXPECT_EQ(s.warmup_initial_learning_rate(), 0.0f);
  EXPECT_EQ(s.decay_steps(), 10);
  EXPECT_FLOAT_EQ(s.alpha(), 0.1f);
}

TEST(KerasCompileTest, AdamWWithoutWeightDecayTakesKerasDefault) {
  const OptimizerConfig opt =
      Parse(R"({"class_name": "AdamW", "config": {"learning_rate": 0.002}})");
  EXPECT_FLOAT_EQ(opt.weight_decay(), 0.004f);
  EXPECT_FLOAT_EQ(opt.learning_rate(), 0.002f);
  EXPECT_FALSE(opt.has_schedule());
  EXPECT_FALSE(opt.has_clipping());
}

TEST(KerasCompileTest, SgdWithPiecewiseClipnormAndWeightDecay) {
  const OptimizerConfig opt = Parse(R"({"module": "keras.optimizers",
    "class_name": "SGD", "config": {"name": "sgd", "learning_rate":
    {"module": "keras.optimizers.schedules", "class_name":
    "PiecewiseConstantDecay", "config": {"boundaries": [2, 4], "values":
    [0.1, 0.05, 0.01], "name": "PiecewiseConstant"}, "registered_name": null},
    "weight_decay": 0.01, "clipnorm": 0.5, "global_clipnorm": null,
    "clipvalue": null, "use_ema": false, "momentum": 0.0,
    "nesterov": false}})");
  EXPECT_TRUE(opt.has_sgd());
  EXPECT_FLOAT_EQ(opt.weight_decay(), 0.01f);
  EXPECT_FLOAT_EQ(opt.clipping().norm(), 0.5f);
  EXPECT_EQ(opt.schedule().decay(), LearningRateSchedule::DECAY_PIECEWISE);
  EXPECT_THAT(opt.schedule().boundaries(), ElementsAre(2, 4));
  EXPECT_THAT(opt.schedule().values(), ElementsAre(0.1f, 0.05f, 0.01f));
  EXPECT_FLOAT_EQ(opt.learning_rate(), 0.1f);
}

TEST(KerasCompileTest, AdagradWithExponentialDecayAndClipvalue) {
  const OptimizerConfig opt = Parse(R"({"class_name": "Adagrad", "config": {
    "learning_rate": {"module": "keras.optimizers.schedules", "class_name":
    "ExponentialDecay", "config": {"initial_learning_rate": 0.1,
    "decay_steps": 5, "decay_rate": 0.5, "staircase": true, "name":
    "ExponentialDecay"}}, "weight_decay": null, "clipvalue": 0.5}})");
  EXPECT_TRUE(opt.has_adagrad());
  EXPECT_EQ(opt.weight_decay(), 0.0f);
  EXPECT_FLOAT_EQ(opt.clipping().value(), 0.5f);
  EXPECT_FLOAT_EQ(opt.learning_rate(), 0.1f);
  EXPECT_EQ(opt.schedule().decay(), LearningRateSchedule::DECAY_EXPONENTIAL);
  EXPECT_EQ(opt.schedule().decay_steps(), 5);
  EXPECT_FLOAT_EQ(opt.schedule().decay_rate(), 0.5f);
  EXPECT_TRUE(opt.schedule().staircase());
}

TEST(KerasCompileTest, FtrlWithPolynomialDecay) {
  const OptimizerConfig opt = Parse(R"({"class_name": "Ftrl", "config": {
    "learning_rate": {"module": "keras.optimizers.schedules", "class_name":
    "PolynomialDecay", "config": {"initial_learning_rate": 0.1,
    "decay_steps": 5, "end_learning_rate": 0.01, "power": 2.0, "cycle": true,
    "name": "PolynomialDecay"}}}})");
  EXPECT_TRUE(opt.has_ftrl());
  EXPECT_FLOAT_EQ(opt.learning_rate(), 0.1f);
  const LearningRateSchedule& s = opt.schedule();
  EXPECT_EQ(s.decay(), LearningRateSchedule::DECAY_POLYNOMIAL);
  EXPECT_FLOAT_EQ(s.end_learning_rate(), 0.01f);
  EXPECT_FLOAT_EQ(s.power(), 2.0f);
  EXPECT_TRUE(s.cycle());
}

TEST(KerasCompileTest, CosineDecayWithoutWarmupTargetHasNoWarmup) {
  // Keras reads warmup_steps only with a warmup_target.
  const OptimizerConfig opt = Parse(R"({"class_name": "Adam", "config": {
    "learning_rate": {"class_name": "CosineDecay", "config": {
    "initial_learning_rate": 0.01, "decay_steps": 100, "alpha": 0.0,
    "warmup_target": null, "warmup_steps": 7}}}})");
  EXPECT_FLOAT_EQ(opt.learning_rate(), 0.01f);
  EXPECT_EQ(opt.schedule().warmup_steps(), 0);
  EXPECT_EQ(opt.weight_decay(), 0.0f);
}

TEST(KerasCompileTest, CosineDecayToATargetWithoutWarmupStepsStartsThere) {
  // Keras decays from warmup_target at once when warmup_steps is 0; the
  // job then has no warm-up, and its export says the same schedule.
  const OptimizerConfig opt = Parse(R"({"class_name": "Adam", "config": {
    "learning_rate": {"class_name": "CosineDecay", "config": {
    "initial_learning_rate": 0.5, "decay_steps": 100, "alpha": 0.0,
    "warmup_target": 0.01, "warmup_steps": 0}}}})");
  EXPECT_FLOAT_EQ(opt.learning_rate(), 0.01f);
  EXPECT_EQ(opt.schedule().warmup_steps(), 0);
  EXPECT_EQ(opt.schedule().warmup_initial_learning_rate(), 0.0f);
}

TEST(KerasCompileTest, RefusesWhatTesseraLacksByName) {
  const auto error = [](const std::string& text) {
    absl::StatusOr<OptimizerConfig> opt = ParseOptimizer(json::parse(text));
    EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(opt.status().message());
  };
  EXPECT_THAT(
      error(R"({"class_name": "Adam", "config": {"learning_rate":
        {"class_name": "InverseTimeDecay", "config": {
        "initial_learning_rate": 0.1, "decay_steps": 1, "decay_rate": 0.5}}}})"),
      HasSubstr("optimizer Adam: learning_rate schedule InverseTimeDecay: "
                "Tessera has ExponentialDecay, PiecewiseConstantDecay"));
  EXPECT_THAT(error(R"({"class_name": "Adam", "config": {"learning_rate":
        {"class_name": "CosineDecayRestarts", "config": {}}}})"),
              HasSubstr("CosineDecayRestarts"));
  EXPECT_THAT(error(R"({"class_name": "SGD", "config": {"clipnorm": 1.0,
        "clipvalue": 0.5}})"),
              HasSubstr("optimizer SGD: set at most one of clipvalue"));
  EXPECT_THAT(error(R"({"class_name": "SGD", "config": {"clipnorm": -1}})"),
              HasSubstr("clipnorm must be a number >= 0"));
  EXPECT_THAT(error(R"({"class_name": "Adam", "config": {
        "gradient_accumulation_steps": 4}})"),
              HasSubstr("gradient_accumulation_steps is set"));
  EXPECT_THAT(error(R"({"class_name": "Adam", "config": {"use_ema": true}})"),
              HasSubstr("use_ema"));
  EXPECT_THAT(error(R"({"class_name": "Adam", "config": {"learning_rate":
        {"class_name": "ExponentialDecay", "config": {
        "initial_learning_rate": 0.1, "decay_steps": 2.5,
        "decay_rate": 0.5}}}})"),
              HasSubstr("decay_steps must be a whole number >= 1"));
  EXPECT_THAT(error(R"({"class_name": "Adam", "config": {"learning_rate":
        {"class_name": "PiecewiseConstantDecay", "config": {
        "boundaries": [2, 4], "values": [0.1, 0.05]}}}})"),
              HasSubstr("one more value than boundaries"));
}

}  // namespace
}  // namespace keras
}  // namespace tessera
