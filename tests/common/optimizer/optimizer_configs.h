// OptimizerConfigs the optimizer tests (and the parameter server's) share.

#ifndef TESSERA_TESTS_COMMON_OPTIMIZER_OPTIMIZER_CONFIGS_H_
#define TESSERA_TESTS_COMMON_OPTIMIZER_OPTIMIZER_CONFIGS_H_

#include "proto/job.pb.h"

namespace tessera {
namespace optimizer_test {

inline OptimizerConfig SgdConfig(float learning_rate) {
  OptimizerConfig config;
  config.set_learning_rate(learning_rate);
  config.mutable_sgd();
  return config;
}

inline OptimizerConfig MomentumConfig(float learning_rate, float momentum,
                                      bool nesterov) {
  OptimizerConfig config;
  config.set_learning_rate(learning_rate);
  config.mutable_momentum()->set_momentum(momentum);
  config.mutable_momentum()->set_nesterov(nesterov);
  return config;
}

inline OptimizerConfig AdamConfig(float learning_rate, float beta1, float beta2,
                                  float epsilon) {
  OptimizerConfig config;
  config.set_learning_rate(learning_rate);
  config.mutable_adam()->set_beta1(beta1);
  config.mutable_adam()->set_beta2(beta2);
  config.mutable_adam()->set_epsilon(epsilon);
  return config;
}

}  // namespace optimizer_test
}  // namespace tessera

#endif  // TESSERA_TESTS_COMMON_OPTIMIZER_OPTIMIZER_CONFIGS_H_
