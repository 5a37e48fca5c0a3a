// Keras' optimizer defaults, owned here alone: the servers' optimizers, the
// flags, and the Keras importer and exporter all read them from this file so
// that a job trains with, and a Keras model round-trips, the same values.
//
// Adam: a job takes them when --optimizer=adam or a Keras model names Adam
// without them. A job file's `adam {}` sets its three fields itself: an unset
// one means 0 there, not Keras' value.
// Adagrad and Ftrl: their optional fields (proto/job.proto) take Keras' value
// when unset; read them through the functions below, which resolve that.
#ifndef TESSERA_COMMON_OPTIMIZER_KERAS_DEFAULTS_H_
#define TESSERA_COMMON_OPTIMIZER_KERAS_DEFAULTS_H_

#include "proto/job.pb.h"

namespace tessera {

inline constexpr float kKerasLearningRate = 0.001f;  // Adam's, and most others'
inline constexpr float kKerasSgdLearningRate = 0.01f;
inline constexpr float kKerasAdamBeta1 = 0.9f;
inline constexpr float kKerasAdamBeta2 = 0.999f;
inline constexpr float kKerasAdamEpsilon = 1e-7f;
inline constexpr float kKerasAdagradInitialAccumulator = 0.1f;
inline constexpr float kKerasAdagradEpsilon = 1e-7f;
inline constexpr float kKerasFtrlLearningRatePower = -0.5f;
inline constexpr float kKerasFtrlInitialAccumulator = 0.1f;
// AdamW's weight_decay (every other optimizer's is none), and
// PolynomialDecay's end_learning_rate.
inline constexpr float kKerasAdamWWeightDecay = 0.004f;
inline constexpr float kKerasPolynomialEndLearningRate = 0.0001f;

// AdamOptions with Keras' beta_1, beta_2 and epsilon.
inline AdamOptions KerasAdamOptions() {
  AdamOptions adam;
  adam.set_beta1(kKerasAdamBeta1);
  adam.set_beta2(kKerasAdamBeta2);
  adam.set_epsilon(kKerasAdamEpsilon);
  return adam;
}

// The value a job trains with: the field when set, else Keras' default.
inline float AdagradInitialAccumulator(const AdagradOptions& a) {
  return a.has_initial_accumulator_value() ? a.initial_accumulator_value()
                                           : kKerasAdagradInitialAccumulator;
}
inline float AdagradEpsilon(const AdagradOptions& a) {
  return a.has_epsilon() ? a.epsilon() : kKerasAdagradEpsilon;
}
inline float FtrlLearningRatePower(const FtrlOptions& f) {
  return f.has_learning_rate_power() ? f.learning_rate_power()
                                     : kKerasFtrlLearningRatePower;
}
inline float FtrlInitialAccumulator(const FtrlOptions& f) {
  return f.has_initial_accumulator_value() ? f.initial_accumulator_value()
                                           : kKerasFtrlInitialAccumulator;
}

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_KERAS_DEFAULTS_H_
