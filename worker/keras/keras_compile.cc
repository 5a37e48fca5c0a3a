#include "worker/keras/keras_compile.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/optimizer/keras_defaults.h"
#include "worker/keras/keras_config.h"
#include "worker/keras/keras_graph.h"

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

absl::StatusOr<OptimizerConfig> ParseOptimizer(const json& j) {
  const std::string cls = ObjectName(j);
  const std::string name = KerasSnakeCase(cls);
  const json c =
      j.is_object() && j.contains("config") && j["config"].is_object()
          ? j["config"]
          : json::object();
  const std::string what = absl::StrCat("optimizer ", cls);
  for (const char* f :
       {"weight_decay", "clipnorm", "global_clipnorm", "clipvalue",
        "loss_scale_factor", "gradient_accumulation_steps"}) {
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
  OptimizerConfig opt;
  if (c.contains("learning_rate") && !c["learning_rate"].is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": learning_rate is a schedule (", ObjectName(c["learning_rate"]),
        "); Tessera's learning rate is constant"));
  }
  const float default_lr =
      name == "sgd" ? kKerasSgdLearningRate : kKerasLearningRate;
  opt.set_learning_rate(Float(c, "learning_rate", default_lr));
  if (name == "adam") {
    if (c.value("amsgrad", false)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": amsgrad: Tessera's Adam has no amsgrad"));
    }
    AdamOptions* a = opt.mutable_adam();
    a->set_beta1(Float(c, "beta_1", kKerasAdamBeta1));
    a->set_beta2(Float(c, "beta_2", kKerasAdamBeta2));
    a->set_epsilon(Float(c, "epsilon", kKerasAdamEpsilon));
  } else if (name == "sgd") {
    const float momentum = Float(c, "momentum", 0.0f);
    const bool nesterov = c.value("nesterov", false);
    if (momentum == 0 && !nesterov) {
      opt.mutable_sgd();
    } else {
      opt.mutable_momentum()->set_momentum(momentum);
      opt.mutable_momentum()->set_nesterov(nesterov);
    }
  } else if (name == "adagrad") {
    AdagradOptions* a = opt.mutable_adagrad();
    a->set_initial_accumulator_value(
        Float(c, "initial_accumulator_value", kKerasAdagradInitialAccumulator));
    a->set_epsilon(Float(c, "epsilon", kKerasAdagradEpsilon));
  } else if (name == "ftrl") {
    FtrlOptions* f = opt.mutable_ftrl();
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
        "Adagrad and Ftrl)"));
  }
  if (!std::isfinite(opt.learning_rate()) || opt.learning_rate() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": learning_rate must be a number > 0"));
  }
  // Keras' optimizers step every row of an Embedding, touched or not
  // (Adam's moments and SGD's momentum move them all).
  opt.set_table_updates(TABLE_UPDATES_DENSE);
  return opt;
}

}  // namespace keras
}  // namespace tessera
