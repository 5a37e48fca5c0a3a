// Adam's and Adagrad's element-wise updates also built for AVX2 (8 floats
// per instruction instead of the baseline's 4), picked at run time: a
// parameter server spends most of a small step's work in them. Built
// without FMA and with an exact square root, so every element gets exactly
// the bits of the baseline build (each multiply, add, division and square
// root is correctly rounded in both), and replicas, restored twins and
// runs on different CPUs agree.
#ifndef TESSERA_COMMON_OPTIMIZER_OPTIMIZER_AVX2_H_
#define TESSERA_COMMON_OPTIMIZER_OPTIMIZER_AVX2_H_

#include <cstdint>

namespace tessera {
namespace optimizer_internal {

// Whether this build has the AVX2 updates and this CPU runs them (checked
// once, in optimizers.cc, which is built for the baseline).
bool UseOptimizerAvx2();

// AdamOptimizer::Apply with the bias-corrected step size `lr_t`; only when
// UseOptimizerAvx2().
void AdamAvx2(float* w, const float* g, float* m, float* v, int64_t n,
              float beta1, float beta2, float lr_t, float epsilon);
// AdagradOptimizer::Apply; only when UseOptimizerAvx2().
void AdagradAvx2(float* w, const float* g, float* acc, int64_t n, float lr,
                 float epsilon);

}  // namespace optimizer_internal
}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_OPTIMIZER_AVX2_H_
