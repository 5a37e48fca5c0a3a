// Built with -mavx2 (common/optimizer/CMakeLists.txt) on x86-64, without
// FMA: each multiply, add, division and square root is correctly rounded
// on its own, in the baseline's order, so the bits are the baseline's.
//
// One pass over the row, 8 values at a time with unaligned loads. Eigen's
// expressions (the baseline's) take one pass per statement and peel
// scalar elements until the destination is 32-byte aligned: a table's
// rows are 8- or 16-byte aligned, so a 64-float Adagrad row took 50-60 ns
// there against 24-26 ns here (bench/results/tables.md).
#include "common/optimizer/optimizer_avx2.h"

#if defined(TESSERA_OPTIMIZER_AVX2)
#include <immintrin.h>

#include <cmath>
#endif

namespace tessera {
namespace optimizer_internal {

#if defined(TESSERA_OPTIMIZER_AVX2)

void AdamAvx2(float* w, const float* g, float* m, float* v, int64_t n,
              float beta1, float beta2, float lr_t, float epsilon) {
  const float one_minus_beta1 = 1.0f - beta1;
  const float one_minus_beta2 = 1.0f - beta2;
  const __m256 b1 = _mm256_set1_ps(beta1);
  const __m256 b2 = _mm256_set1_ps(beta2);
  const __m256 c1 = _mm256_set1_ps(one_minus_beta1);
  const __m256 c2 = _mm256_set1_ps(one_minus_beta2);
  const __m256 lr = _mm256_set1_ps(lr_t);
  const __m256 eps = _mm256_set1_ps(epsilon);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 mv = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)),
                                    _mm256_mul_ps(c1, gv));
    const __m256 vv = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                    _mm256_mul_ps(c2, _mm256_mul_ps(gv, gv)));
    _mm256_storeu_ps(m + i, mv);
    _mm256_storeu_ps(v + i, vv);
    const __m256 step = _mm256_div_ps(_mm256_mul_ps(lr, mv),
                                      _mm256_add_ps(_mm256_sqrt_ps(vv), eps));
    _mm256_storeu_ps(w + i, _mm256_sub_ps(_mm256_loadu_ps(w + i), step));
  }
  for (; i < n; ++i) {
    m[i] = beta1 * m[i] + one_minus_beta1 * g[i];
    v[i] = beta2 * v[i] + one_minus_beta2 * (g[i] * g[i]);
    w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + epsilon);
  }
}

void AdagradAvx2(float* w, const float* g, float* acc, int64_t n, float lr,
                 float epsilon) {
  const __m256 lrv = _mm256_set1_ps(lr);
  const __m256 eps = _mm256_set1_ps(epsilon);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 a =
        _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_mul_ps(gv, gv));
    _mm256_storeu_ps(acc + i, a);
    const __m256 step = _mm256_div_ps(_mm256_mul_ps(lrv, gv),
                                      _mm256_add_ps(_mm256_sqrt_ps(a), eps));
    _mm256_storeu_ps(w + i, _mm256_sub_ps(_mm256_loadu_ps(w + i), step));
  }
  for (; i < n; ++i) {
    acc[i] += g[i] * g[i];
    w[i] -= lr * g[i] / (std::sqrt(acc[i]) + epsilon);
  }
}

#else

void AdamAvx2(float*, const float*, float*, float*, int64_t, float, float,
              float, float) {}
void AdagradAvx2(float*, const float*, float*, int64_t, float, float) {}

#endif

}  // namespace optimizer_internal
}  // namespace tessera
