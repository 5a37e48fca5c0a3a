#ifndef TESSERA_COMMON_OPTIMIZER_OPTIMIZERS_H_
#define TESSERA_COMMON_OPTIMIZER_OPTIMIZERS_H_

#include "common/optimizer/optimizer.h"

namespace tessera {

// Plain SGD: w -= lr * g.
class SgdOptimizer final : public Optimizer {
 public:
  explicit SgdOptimizer(float learning_rate) : Optimizer(learning_rate) {}
  int num_slots() const override { return 0; }
  std::string name() const override { return "sgd"; }
  std::string slot_name(int slot) const override { return ""; }
  void Apply(float* values, const float* grad, float* const* slots, int64_t n,
             UpdateStep t) const override;
};

// Keras' SGD with momentum: v = m*v - lr*g; w += v (Nesterov:
// w += m*v - lr*g).
class MomentumOptimizer final : public Optimizer {
 public:
  MomentumOptimizer(float learning_rate, float momentum, bool nesterov)
      : Optimizer(learning_rate), momentum_(momentum), nesterov_(nesterov) {}
  int num_slots() const override { return 1; }
  std::string name() const override { return "momentum"; }
  std::string slot_name(int slot) const override { return "momentum"; }
  void Apply(float* values, const float* grad, float* const* slots, int64_t n,
             UpdateStep t) const override;

 private:
  const float momentum_;
  const bool nesterov_;
};

// Adam as in Keras: bias correction folded into the step size,
// w -= lr_t * m / (sqrt(v) + eps).
class AdamOptimizer final : public Optimizer {
 public:
  AdamOptimizer(float learning_rate, float beta1, float beta2, float epsilon)
      : Optimizer(learning_rate),
        beta1_(beta1),
        beta2_(beta2),
        epsilon_(epsilon) {}
  int num_slots() const override { return 2; }
  std::string name() const override { return "adam"; }
  std::string slot_name(int slot) const override {
    return slot == 0 ? "m" : "v";
  }
  void Apply(float* values, const float* grad, float* const* slots, int64_t n,
             UpdateStep t) const override;

 private:
  const float beta1_, beta2_, epsilon_;
};

// Keras' Adagrad (TF's ApplyAdagradV2): acc += g^2;
// w -= lr * g / (sqrt(acc) + epsilon). Slot 0 is the accumulator, starting
// at initial_accumulator_value.
class AdagradOptimizer final : public Optimizer {
 public:
  AdagradOptimizer(float learning_rate, float initial_accumulator_value,
                   float epsilon)
      : Optimizer(learning_rate),
        initial_accumulator_(initial_accumulator_value),
        epsilon_(epsilon) {}
  int num_slots() const override { return 1; }
  float slot_initial_value(int slot) const override {
    return initial_accumulator_;
  }
  std::string name() const override { return "adagrad"; }
  std::string slot_name(int slot) const override { return "accumulator"; }
  void Apply(float* values, const float* grad, float* const* slots, int64_t n,
             UpdateStep t) const override;
  float epsilon() const { return epsilon_; }

 private:
  const float initial_accumulator_, epsilon_;
};

// FTRL-Proximal as TF's ApplyFtrlV2 / Keras' Ftrl, with p = lr_power:
//   g' = g + 2 * l2_shrinkage * w
//   acc' = acc + g^2
//   linear += g' - (acc'^-p - acc^-p) / lr * w
//   w = |linear| > l1 ? (l1 * sign(linear) - linear) /
//                       (acc'^-p / lr + 2 * l2') : 0
// where l2' = l2 + beta / (2 * lr) (Keras' beta). Slot 0 is the
// accumulator (starting at initial_accumulator_value), slot 1 "linear".
class FtrlOptimizer final : public Optimizer {
 public:
  struct Options {
    float learning_rate;
    float learning_rate_power;
    float initial_accumulator_value;
    float l1, l2, l2_shrinkage, beta;
  };
  explicit FtrlOptimizer(const Options& options)
      : Optimizer(options.learning_rate), o_(options) {}
  int num_slots() const override { return 2; }
  float slot_initial_value(int slot) const override {
    return slot == 0 ? o_.initial_accumulator_value : 0.0f;
  }
  std::string name() const override { return "ftrl"; }
  std::string slot_name(int slot) const override {
    return slot == 0 ? "accumulator" : "linear";
  }
  void Apply(float* values, const float* grad, float* const* slots, int64_t n,
             UpdateStep t) const override;

 private:
  const Options o_;
};

// Not a gradient rule: keeps a moving average of the values pushed,
// w = momentum * w + (1 - momentum) * g. BatchNorm's moving mean and
// variance use it (workers push their batch's moments), so in sync mode
// the average moves once per step by the mean of the workers' moments and
// in async mode once per worker push.
class MovingAverageOptimizer final : public Optimizer {
 public:
  explicit MovingAverageOptimizer(float momentum)
      : Optimizer(0.0f), momentum_(momentum) {}
  int num_slots() const override { return 0; }
  std::string name() const override { return "moving_average"; }
  std::string slot_name(int slot) const override { return ""; }
  void Apply(float* values, const float* grad, float* const* slots, int64_t n,
             UpdateStep t) const override;

 private:
  const float momentum_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_OPTIMIZERS_H_
