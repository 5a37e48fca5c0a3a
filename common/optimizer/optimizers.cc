#include "common/optimizer/optimizers.h"

#include <cmath>
#include <utility>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "common/optimizer/keras_defaults.h"
#include "common/optimizer/optimizer_avx2.h"
#include "common/optimizer/rowwise_adagrad.h"

namespace tessera {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

// The correctly rounded square root in every lane. Eigen's own sqrt() is,
// under its default EIGEN_FAST_MATH, rsqrt plus one Newton step in packets
// but std::sqrt in the scalar tail, so an element's bits depended on where
// a shard's boundaries put it: a checkpoint restored onto other shard
// sizes (another partitioner, more servers) drifted from its twin.
struct ExactSqrt {
  float operator()(float x) const { return std::sqrt(x); }
  template <typename Packet>
  Packet packetOp(const Packet& x) const {
    return SqrtPacket(x);
  }

 private:
#if defined(__SSE2__)
  static __m128 SqrtPacket(__m128 x) { return _mm_sqrt_ps(x); }
#endif
#if defined(__AVX__)
  static __m256 SqrtPacket(__m256 x) { return _mm256_sqrt_ps(x); }
#endif
};

template <typename Expr>
auto Sqrt(const Expr& x) {
  return x.unaryExpr(ExactSqrt());
}

}  // namespace
}  // namespace tessera

namespace Eigen {
namespace internal {
template <>
struct functor_traits<tessera::ExactSqrt> {
  enum {
    Cost = 4 * NumTraits<float>::MulCost,
#if defined(__SSE2__)
    PacketAccess = true
#else
    PacketAccess = false
#endif
  };
};
}  // namespace internal
}  // namespace Eigen

namespace tessera {
namespace optimizer_internal {

bool UseOptimizerAvx2() {
#if defined(TESSERA_OPTIMIZER_AVX2)
  static const bool kAvx2 = __builtin_cpu_supports("avx2");
  return kAvx2;
#else
  return false;
#endif
}

}  // namespace optimizer_internal

float Optimizer::BeginUpdate(float* values, int64_t n, UpdateStep t) const {
  const float lr = rate_.Rate(t.schedule);
  if (weight_decay_ != 0) {
    const float wd = weight_decay_;
    for (int64_t i = 0; i < n; ++i) values[i] -= values[i] * wd * lr;
  }
  return lr;
}

void SgdOptimizer::Apply(float* values, const float* grad, float* const* slots,
                         int64_t n, UpdateStep t) const {
  const float lr = BeginUpdate(values, n, t);
  ArrayMap(values, n) -= lr * ConstArrayMap(grad, n);
}

void MomentumOptimizer::Apply(float* values, const float* grad,
                              float* const* slots, int64_t n,
                              UpdateStep t) const {
  const float lr = BeginUpdate(values, n, t);
  ArrayMap w(values, n), v(slots[0], n);
  ConstArrayMap g(grad, n);
  v = momentum_ * v - lr * g;
  if (nesterov_) {
    w += momentum_ * v - lr * g;
  } else {
    w += v;
  }
}

void AdamOptimizer::Apply(float* values, const float* grad, float* const* slots,
                          int64_t n, UpdateStep t) const {
  const float lr = BeginUpdate(values, n, t);
  ArrayMap w(values, n), m(slots[0], n), v(slots[1], n);
  ConstArrayMap g(grad, n);
  const double td = static_cast<double>(t.count);
  const float lr_t =
      static_cast<float>(lr * std::sqrt(1.0 - std::pow(beta2_, td)) /
                         (1.0 - std::pow(beta1_, td)));
  if (optimizer_internal::UseOptimizerAvx2()) {
    optimizer_internal::AdamAvx2(values, grad, slots[0], slots[1], n, beta1_,
                                 beta2_, lr_t, epsilon_);
    return;
  }
  m = beta1_ * m + (1.0f - beta1_) * g;
  v = beta2_ * v + (1.0f - beta2_) * g.square();
  w -= lr_t * m / (Sqrt(v) + epsilon_);
}

void AdagradOptimizer::Apply(float* values, const float* grad,
                             float* const* slots, int64_t n,
                             UpdateStep t) const {
  const float lr = BeginUpdate(values, n, t);
  if (optimizer_internal::UseOptimizerAvx2()) {
    optimizer_internal::AdagradAvx2(values, grad, slots[0], n, lr, epsilon_);
    return;
  }
  ArrayMap w(values, n), acc(slots[0], n);
  ConstArrayMap g(grad, n);
  acc += g.square();
  w -= lr * g / (Sqrt(acc) + epsilon_);
}

void FtrlOptimizer::Apply(float* values, const float* grad, float* const* slots,
                          int64_t n, UpdateStep t) const {
  const float lr = BeginUpdate(values, n, t);
  float* acc = slots[0];
  float* linear = slots[1];
  const float l2 = o_.l2 + o_.beta / (2.0f * lr);
  const float inv_lr = 1.0f / lr;
  // TF special-cases the default power for speed and accuracy; so do we.
  const bool sqrt_power = o_.learning_rate_power == -0.5f;
  const float neg_power = -o_.learning_rate_power;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float w = values[i];
    const float shrunk = g + 2.0f * o_.l2_shrinkage * w;
    const float new_acc = acc[i] + g * g;
    const float new_pow =
        sqrt_power ? std::sqrt(new_acc) : std::pow(new_acc, neg_power);
    const float old_pow =
        sqrt_power ? std::sqrt(acc[i]) : std::pow(acc[i], neg_power);
    linear[i] += shrunk - (new_pow - old_pow) * inv_lr * w;
    const float l = linear[i];
    if (std::fabs(l) > o_.l1) {
      const float sign = l > 0 ? 1.0f : -1.0f;
      values[i] = (o_.l1 * sign - l) / (new_pow * inv_lr + 2.0f * l2);
    } else {
      values[i] = 0.0f;
    }
    acc[i] = new_acc;
  }
}

namespace {

absl::StatusOr<std::unique_ptr<Optimizer>> CreateAdagrad(
    float lr, const AdagradOptions& a) {
  const float initial = AdagradInitialAccumulator(a);
  const float epsilon = AdagradEpsilon(a);
  if (!(initial >= 0) || !std::isfinite(initial)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.adagrad.initial_accumulator_value must be a finite "
        "number >= 0, got ",
        initial));
  }
  if (!(epsilon >= 0) || !std::isfinite(epsilon) ||
      (initial == 0 && epsilon == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.adagrad.epsilon must be a finite number >= 0, and > 0 "
        "when initial_accumulator_value is 0, got ",
        epsilon));
  }
  return std::make_unique<AdagradOptimizer>(lr, initial, epsilon);
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateFtrl(float lr,
                                                      const FtrlOptions& f) {
  FtrlOptimizer::Options o;
  o.learning_rate = lr;
  o.learning_rate_power = FtrlLearningRatePower(f);
  o.initial_accumulator_value = FtrlInitialAccumulator(f);
  o.l1 = f.l1();
  o.l2 = f.l2();
  o.l2_shrinkage = f.l2_shrinkage();
  o.beta = f.beta();
  // Keras' checks, which also keep acc^-p finite.
  if (!(o.learning_rate_power <= 0) || !std::isfinite(o.learning_rate_power)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.ftrl.learning_rate_power must be finite and <= 0, got ",
        o.learning_rate_power));
  }
  if (!(o.initial_accumulator_value >= 0) ||
      !std::isfinite(o.initial_accumulator_value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.ftrl.initial_accumulator_value must be a finite number "
        ">= 0, got ",
        o.initial_accumulator_value));
  }
  const std::pair<const char*, float> nonnegative[] = {
      {"l1", o.l1},
      {"l2", o.l2},
      {"l2_shrinkage", o.l2_shrinkage},
      {"beta", o.beta}};
  for (const auto& [field, value] : nonnegative) {
    if (!(value >= 0) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer.ftrl.", field,
                       " must be a finite number >= 0, got ", value));
    }
  }
  // With an empty accumulator and no l2 or beta, an element whose gradient
  // is 0 has a zero denominator (w = .../0) once l2_shrinkage moved z.
  if (o.initial_accumulator_value == 0 && o.l2 == 0 && o.beta == 0) {
    return absl::InvalidArgumentError(
        "optimizer.ftrl: initial_accumulator_value 0 needs l2 > 0 or beta > "
        "0, or an element with a zero gradient would divide by zero");
  }
  return std::make_unique<FtrlOptimizer>(o);
}

}  // namespace

void MovingAverageOptimizer::Apply(float* values, const float* grad,
                                   float* const* slots, int64_t n,
                                   UpdateStep t) const {
  const float keep = momentum_, take = 1.0f - momentum_;
  for (int64_t i = 0; i < n; ++i) values[i] = keep * values[i] + take * grad[i];
}

namespace {

bool RateCanReachZero(const LearningRateSchedule& s) {
  if (s.warmup_steps() > 0 && s.warmup_initial_learning_rate() == 0) {
    return true;
  }
  switch (s.decay()) {
    case LearningRateSchedule::DECAY_COSINE:
      return s.alpha() == 0;
    case LearningRateSchedule::DECAY_POLYNOMIAL:
      return s.end_learning_rate() == 0;
    default:
      return false;
  }
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizerKind(
    const OptimizerConfig& config) {
  if (config.has_moving_average()) {
    // A statistic's rule has no learning rate.
    const float m = config.moving_average().momentum();
    if (!(m >= 0 && m < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer.moving_average.momentum must be in [0, 1), got ", m));
    }
    return std::make_unique<MovingAverageOptimizer>(m);
  }
  const float lr = config.learning_rate();
  if (!(lr > 0) || !std::isfinite(lr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.learning_rate must be a finite number > 0, got ", lr));
  }
  switch (config.kind_case()) {
    case OptimizerConfig::kSgd:
      return std::make_unique<SgdOptimizer>(lr);
    case OptimizerConfig::kMomentum: {
      const float m = config.momentum().momentum();
      if (!(m >= 0 && m < 1)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "optimizer.momentum.momentum must be in [0, 1), got ", m));
      }
      return std::make_unique<MomentumOptimizer>(lr, m,
                                                 config.momentum().nesterov());
    }
    case OptimizerConfig::kAdam: {
      const AdamOptions& a = config.adam();
      if (!(a.beta1() >= 0 && a.beta1() < 1) ||
          !(a.beta2() >= 0 && a.beta2() < 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer.adam: beta1 and beta2 must be in [0, 1), "
                         "got ",
                         a.beta1(), " and ", a.beta2()));
      }
      if (!(a.epsilon() > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "optimizer.adam.epsilon must be > 0, got ", a.epsilon()));
      }
      return std::make_unique<AdamOptimizer>(lr, a.beta1(), a.beta2(),
                                             a.epsilon());
    }
    case OptimizerConfig::kAdagrad:
      return CreateAdagrad(lr, config.adagrad());
    case OptimizerConfig::kFtrl:
      return CreateFtrl(lr, config.ftrl());
    case OptimizerConfig::kRowwiseAdagrad:
      return CreateRowwiseAdagrad(lr, config.rowwise_adagrad());
    default:
      return absl::InvalidArgumentError(
          "optimizer: no kind set (one of sgd, momentum, adam, adagrad, "
          "ftrl, rowwise_adagrad)");
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(
    const OptimizerConfig& config) {
  if (!TableUpdates_IsValid(config.table_updates())) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.table_updates: ", config.table_updates(),
                     " is neither TABLE_UPDATES_LAZY nor TABLE_UPDATES_DENSE"));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizerKind(config);
  if (!optimizer.ok()) return optimizer;
  (*optimizer)->set_table_updates(config.table_updates());
  // A statistic's rule has no rate to schedule and nothing to decay.
  if (config.has_moving_average()) return optimizer;
  absl::StatusOr<LearningRate> rate = LearningRate::Create(config);
  if (!rate.ok()) return rate.status();
  const float wd = config.weight_decay();
  if (!(wd >= 0) || !std::isfinite(wd)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.weight_decay must be a finite number >= 0, got ", wd));
  }
  if (config.has_ftrl() && RateCanReachZero(config.schedule())) {
    return absl::InvalidArgumentError(
        "optimizer.schedule: FTRL divides by the learning rate, so its "
        "schedule must stay above 0 (a warm-up needs "
        "warmup_initial_learning_rate > 0, a cosine decay alpha > 0, a "
        "polynomial decay end_learning_rate > 0)");
  }
  (*optimizer)->set_learning_rate(*rate);
  (*optimizer)->set_weight_decay(wd);
  return optimizer;
}

}  // namespace tessera
