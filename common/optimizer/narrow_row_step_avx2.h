// The fused pass of narrow_row_step.h, built with AVX2 and F16C
// (narrow_row_step_avx2.cc) and called only when row_precision's
// UseF16c() says this CPU runs it.
#ifndef TESSERA_COMMON_OPTIMIZER_NARROW_ROW_STEP_AVX2_H_
#define TESSERA_COMMON_OPTIMIZER_NARROW_ROW_STEP_AVX2_H_

#include <cstdint>

namespace tessera {
namespace narrow_row_internal {

// What moves each value w_j of the row by its gradient g_j, in fp32:
//  - kScaled: w_j = w_j - scale * g_j (SGD with scale = lr;
//    rowwise_adagrad with its row's step size);
//  - kAdagrad: acc_j = acc_j + g_j * g_j, then
//    w_j = w_j - (lr * g_j) / (sqrt(acc_j) + epsilon).
enum class Kernel { kScaled, kAdagrad };

struct RowKernel {
  Kernel kernel = Kernel::kScaled;
  bool bf16 = false;  // else fp16
  float scale = 0;    // kScaled
  float lr = 0;       // kAdagrad
  float epsilon = 0;  // kAdagrad
};

// Widens stored[0, n) (fp16 or bf16 bits), steps it as `k` says with
// grad[0, n) (and acc[0, n) for kAdagrad), and stores it rounded
// stochastically with `seed` as NarrowRowStochastic does.
void StepNarrowRowAvx2(const RowKernel& k, uint16_t* stored, const float* grad,
                       float* acc, int64_t n, uint64_t seed);

}  // namespace narrow_row_internal
}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_NARROW_ROW_STEP_AVX2_H_
