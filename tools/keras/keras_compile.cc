#include "tools/keras/keras_compile.h"

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/optimizer/keras_defaults.h"
#include "common/optimizer/optimizer.h"
#include "tools/keras/keras_config.h"
#include "tools/keras/keras_graph.h"

namespace tessera {
namespace keras {

absl::StatusOr<LossSpec> ParseLoss(const json& j, const std::string& output) {
  LossSpec spec;
  const std::string what = absl::StrCat("loss of output \"", output, "\"");
  std::string name = KerasSnakeCase(ObjectName(j));
  const json c =
      j.is_object() && j.contains("config") && j["config"].is_object()
          ? j["config"]
          : json::object();
  if (name == "mse" || name == "mean_squared_error")
    name = "mean_squared_error";
  if (name != "sparse_categorical_crossentropy" &&
      name != "categorical_crossentropy" && name != "binary_crossentropy" &&
      name != "mean_squared_error") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", ObjectName(j),
                     "\": Tessera has sparse_categorical_crossentropy, "
                     "categorical_crossentropy, binary_crossentropy and "
                     "mean_squared_error"));
  }
  spec.name = name;
  spec.from_logits = c.value("from_logits", false);
  const std::string reduction =
      c.value("reduction", std::string("sum_over_batch_size"));
  if (reduction != "sum_over_batch_size" && reduction != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": reduction \"", reduction,
                     "\": Tessera averages over the batch "
                     "(sum_over_batch_size)"));
  }
  if (c.value("label_smoothing", 0.0) != 0.0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": label_smoothing: Tessera has none"));
  }
  if (!IsNull(c, "ignore_class")) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ignore_class: Tessera has none"));
  }
  return spec;
}

namespace {

// A Keras count of steps: a whole number, at least `min`.
absl::StatusOr<int64_t> Steps(const json& c, const char* key, int64_t min,
                              const std::string& what) {
  if (IsNull(c, key) || !c[key].is_number() ||
      c[key].get<double>() != std::floor(c[key].get<double>()) ||
      c[key].get<double>() < static_cast<double>(min) ||
      c[key].get<double>() > 9e15) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", key, " must be a whole number >= ", min, ", got ",
        IsNull(c, key) ? std::string("nothing") : c[key].dump()));
  }
  return static_cast<int64_t>(c[key].get<double>());
}

// Keras' learning-rate schedule `j` (the optimizer's learning_rate when it
// is not a number) into opt's learning_rate and schedule, as
// proto/job.proto's LearningRateSchedule maps each one.
absl::Status ParseSchedule(const json& j, const std::string& optimizer,
                           OptimizerConfig* opt) {
  const std::string cls = ObjectName(j);
  const std::string what =
      absl::StrCat(optimizer, ": learning_rate schedule ", cls);
  const json c =
      j.is_object() && j.contains("config") && j["config"].is_object()
          ? j["config"]
          : json::object();
  LearningRateSchedule* s = opt->mutable_schedule();
  if (cls == "ExponentialDecay") {
    s->set_decay(LearningRateSchedule::DECAY_EXPONENTIAL);
    opt->set_learning_rate(Float(c, "initial_learning_rate", NAN));
    absl::StatusOr<int64_t> steps = Steps(c, "decay_steps", 1, what);
    if (!steps.ok()) return steps.status();
    s->set_decay_steps(*steps);
    s->set_decay_rate(Float(c, "decay_rate", NAN));
    s->set_staircase(c.value("staircase", false));
  } else if (cls == "PiecewiseConstantDecay") {
    s->set_decay(LearningRateSchedule::DECAY_PIECEWISE);
    if (!c.contains("boundaries") || !c["boundaries"].is_array() ||
        !c.contains("values") || !c["values"].is_array() ||
        c["values"].size() != c["boundaries"].size() + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": needs boundaries and one more value than boundaries"));
    }
    for (const json& b : c["boundaries"]) {
      const json one = {{"boundary", b}};
      absl::StatusOr<int64_t> step = Steps(one, "boundary", 0, what);
      if (!step.ok()) return step.status();
      s->add_boundaries(*step);
    }
    for (const json& v : c["values"]) {
      s->add_values(v.is_number() ? v.get<float>() : NAN);
    }
    // The peak is the first value (learning_rate is not read then).
    opt->set_learning_rate(s->values(0));
  } else if (cls == "CosineDecay") {
    s->set_decay(LearningRateSchedule::DECAY_COSINE);
    absl::StatusOr<int64_t> steps = Steps(c, "decay_steps", 1, what);
    if (!steps.ok()) return steps.status();
    s->set_decay_steps(*steps);
    s->set_alpha(Float(c, "alpha", 0.0f));
    const float initial = Float(c, "initial_learning_rate", NAN);
    if (IsNull(c, "warmup_target")) {
      // Keras ignores warmup_steps without a warmup_target.
      opt->set_learning_rate(initial);
    } else {
      absl::StatusOr<int64_t> warmup = Steps(c, "warmup_steps", 0, what);
      if (!warmup.ok()) return warmup.status();
      opt->set_learning_rate(Float(c, "warmup_target", NAN));
      // Without warm-up steps the decay starts from the target at once.
      if (*warmup > 0) {
        s->set_warmup_initial_learning_rate(initial);
        s->set_warmup_steps(*warmup);
      }
    }
  } else if (cls == "PolynomialDecay") {
    s->set_decay(LearningRateSchedule::DECAY_POLYNOMIAL);
    opt->set_learning_rate(Float(c, "initial_learning_rate", NAN));
    absl::StatusOr<int64_t> steps = Steps(c, "decay_steps", 1, what);
    if (!steps.ok()) return steps.status();
    s->set_decay_steps(*steps);
    s->set_end_learning_rate(
        Float(c, "end_learning_rate", kKerasPolynomialEndLearningRate));
    s->set_power(Float(c, "power", 1.0f));
    s->set_cycle(c.value("cycle", false));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        ": Tessera has ExponentialDecay, PiecewiseConstantDecay, CosineDecay "
        "(with warm-up) and PolynomialDecay"));
  }
  return absl::OkStatus();
}

absl::Status RefuseUnsupportedOptions(const json& c, const std::string& what) {
  for (const char* f : {"loss_scale_factor", "gradient_accumulation_steps"}) {
    if (!IsNull(c, f) && !(c[f].is_number() && c[f].get<double>() == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", f, " is set; Tessera's optimizers have no ", f));
    }
  }
  if (c.value("use_ema", false)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": use_ema: Tessera keeps no moving average of the "
                     "weights"));
  }
  return absl::OkStatus();
}

absl::Status ParseWeightDecay(const json& c, const std::string& what,
                              bool adamw, OptimizerConfig* opt) {
  // AdamW is Adam with decoupled weight decay (Keras' default 0.004).
  const float weight_decay =
      Float(c, "weight_decay", adamw ? kKerasAdamWWeightDecay : 0.0f);
  if (!std::isfinite(weight_decay) || weight_decay < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": weight_decay must be a number >= 0"));
  }
  opt->set_weight_decay(weight_decay);
  return absl::OkStatus();
}

absl::Status ParseClipping(const json& c, const std::string& what,
                           OptimizerConfig* opt) {
  // Keras 3 takes at most one of the three (its constructor refuses more).
  int clips = 0;
  for (const char* f : {"clipvalue", "clipnorm", "global_clipnorm"}) {
    const float v = Float(c, f, 0.0f);
    if (!std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", f, " must be a number >= 0"));
    }
    clips += v > 0;
  }
  if (clips > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": set at most one of clipvalue, clipnorm and global_clipnorm"));
  }
  if (clips == 1) {
    GradientClipping* clipping = opt->mutable_clipping();
    clipping->set_value(Float(c, "clipvalue", 0.0f));
    clipping->set_norm(Float(c, "clipnorm", 0.0f));
    clipping->set_global_norm(Float(c, "global_clipnorm", 0.0f));
  }
  return absl::OkStatus();
}

// The optimizer's own options, by its snake_case name.
absl::Status ParseOptimizerKind(const json& c, const std::string& cls,
                                const std::string& name,
                                const std::string& what, OptimizerConfig* opt) {
  if (name == "adam" || cls == "AdamW") {
    if (c.value("amsgrad", false)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": amsgrad: Tessera's Adam has no amsgrad"));
    }
    AdamOptions* a = opt->mutable_adam();
    a->set_beta1(Float(c, "beta_1", kKerasAdamBeta1));
    a->set_beta2(Float(c, "beta_2", kKerasAdamBeta2));
    a->set_epsilon(Float(c, "epsilon", kKerasAdamEpsilon));
  } else if (name == "sgd") {
    const float momentum = Float(c, "momentum", 0.0f);
    const bool nesterov = c.value("nesterov", false);
    if (momentum == 0 && !nesterov) {
      opt->mutable_sgd();
    } else {
      opt->mutable_momentum()->set_momentum(momentum);
      opt->mutable_momentum()->set_nesterov(nesterov);
    }
  } else if (name == "adagrad") {
    AdagradOptions* a = opt->mutable_adagrad();
    a->set_initial_accumulator_value(
        Float(c, "initial_accumulator_value", kKerasAdagradInitialAccumulator));
    a->set_epsilon(Float(c, "epsilon", kKerasAdagradEpsilon));
  } else if (name == "ftrl") {
    FtrlOptions* f = opt->mutable_ftrl();
    f->set_learning_rate_power(
        Float(c, "learning_rate_power", kKerasFtrlLearningRatePower));
    f->set_initial_accumulator_value(
        Float(c, "initial_accumulator_value", kKerasFtrlInitialAccumulator));
    f->set_l1(Float(c, "l1_regularization_strength", 0));
    f->set_l2(Float(c, "l2_regularization_strength", 0));
    f->set_l2_shrinkage(Float(c, "l2_shrinkage_regularization_strength", 0));
    f->set_beta(Float(c, "beta", 0));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": Tessera has no ", cls.empty() ? "such" : cls,
        " optimizer (it has SGD, SGD with momentum and Nesterov, Adam, "
        "AdamW, Adagrad and Ftrl)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OptimizerConfig> ParseOptimizer(const json& j) {
  const std::string cls = ObjectName(j);
  const std::string name = KerasSnakeCase(cls);
  const json c =
      j.is_object() && j.contains("config") && j["config"].is_object()
          ? j["config"]
          : json::object();
  const std::string what = absl::StrCat("optimizer ", cls);
  if (absl::Status s = RefuseUnsupportedOptions(c, what); !s.ok()) return s;
  OptimizerConfig opt;
  if (absl::Status s = ParseWeightDecay(c, what, cls == "AdamW", &opt);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseClipping(c, what, &opt); !s.ok()) return s;
  if (c.contains("learning_rate") && c["learning_rate"].is_object()) {
    if (absl::Status s = ParseSchedule(c["learning_rate"], what, &opt);
        !s.ok()) {
      return s;
    }
  } else {
    opt.set_learning_rate(
        Float(c, "learning_rate",
              name == "sgd" ? kKerasSgdLearningRate : kKerasLearningRate));
  }
  if (absl::Status s = ParseOptimizerKind(c, cls, name, what, &opt); !s.ok()) {
    return s;
  }
  if (!std::isfinite(opt.learning_rate()) || opt.learning_rate() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": learning_rate must be a number > 0"));
  }
  // The schedule's own ranges, with the optimizer's errors.
  if (absl::StatusOr<std::unique_ptr<Optimizer>> made = CreateOptimizer(opt);
      !made.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", made.status().message()));
  }
  // Keras' optimizers step every row of an Embedding, touched or not
  // (Adam's moments and SGD's momentum move them all).
  opt.set_table_updates(TABLE_UPDATES_DENSE);
  return opt;
}

}  // namespace keras
}  // namespace tessera
