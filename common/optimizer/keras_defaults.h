// Keras' defaults for Adam, which a job takes when --optimizer=adam or a
// Keras model names Adam without them. A job file's `adam {}` sets its
// three fields itself: an unset one means 0 there, not Keras' value.
#ifndef TESSERA_COMMON_OPTIMIZER_KERAS_DEFAULTS_H_
#define TESSERA_COMMON_OPTIMIZER_KERAS_DEFAULTS_H_

#include "proto/job.pb.h"

namespace tessera {

inline constexpr float kKerasLearningRate = 0.001f;  // Adam's, and most others'
inline constexpr float kKerasAdamBeta1 = 0.9f;
inline constexpr float kKerasAdamBeta2 = 0.999f;
inline constexpr float kKerasAdamEpsilon = 1e-7f;

// AdamOptions with Keras' beta_1, beta_2 and epsilon.
inline AdamOptions KerasAdamOptions() {
  AdamOptions adam;
  adam.set_beta1(kKerasAdamBeta1);
  adam.set_beta2(kKerasAdamBeta2);
  adam.set_epsilon(kKerasAdamEpsilon);
  return adam;
}

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_KERAS_DEFAULTS_H_
