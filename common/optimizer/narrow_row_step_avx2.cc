// Built with -mavx2 -mf16c (common/optimizer/CMakeLists.txt) on x86-64.
// No FMA: each multiply, add, division and square root is correctly
// rounded on its own, as in the optimizers' own code, so the fused step
// makes their bits.
#include "common/optimizer/narrow_row_step_avx2.h"

#ifdef TESSERA_ROW_PRECISION_F16C
#include <immintrin.h>

#include <algorithm>

#include "common/optimizer/row_precision_f16c.h"
#include "common/optimizer/row_rounding_avx2.h"
#endif

namespace tessera {
namespace narrow_row_internal {

#ifdef TESSERA_ROW_PRECISION_F16C

namespace {

using row_rounding_avx2::Draws8;

// Values i..i+7 of the row: s, g and acc point at them, draws count from i.
template <Kernel kKernel, bool kBf16>
__attribute__((always_inline)) inline void Step8(const RowKernel& k,
                                                 const Draws8& draws,
                                                 uint16_t* s, const float* g,
                                                 float* acc, int64_t i) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  __m256 w = kBf16 ? _mm256_castsi256_ps(
                         _mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16))
                   : _mm256_cvtph_ps(bits);
  const __m256 gv = _mm256_loadu_ps(g);
  if (kKernel == Kernel::kScaled) {
    w = _mm256_sub_ps(w, _mm256_mul_ps(_mm256_set1_ps(k.scale), gv));
  } else {
    const __m256 a = _mm256_add_ps(_mm256_loadu_ps(acc), _mm256_mul_ps(gv, gv));
    _mm256_storeu_ps(acc, a);
    const __m256 denominator =
        _mm256_add_ps(_mm256_sqrt_ps(a), _mm256_set1_ps(k.epsilon));
    w = _mm256_sub_ps(
        w, _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(k.lr), gv), denominator));
  }
  const __m128i out = kBf16 ? row_rounding_avx2::RoundBfloat16x8(draws, w, i)
                            : row_rounding_avx2::RoundHalf8(draws, w, i);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(s), out);
}

template <Kernel kKernel, bool kBf16>
__attribute__((always_inline)) inline void StepRow(const RowKernel& k,
                                                   const Draws8& draws,
                                                   uint16_t* stored,
                                                   const float* grad,
                                                   float* acc, int64_t n) {
  constexpr bool kSlot = kKernel == Kernel::kAdagrad;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Step8<kKernel, kBf16>(k, draws, stored + i, grad + i,
                          kSlot ? acc + i : nullptr, i);
  }
  if (i == n) return;
  // The last n - i values in lanes of their own: every lane is computed
  // alone and draws by its index, so the padding changes nothing (its
  // accumulator 1 keeps the padded lanes finite).
  const int64_t m = n - i;
  alignas(16) uint16_t s[8] = {};
  alignas(32) float g[8] = {};
  alignas(32) float a[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  std::copy(stored + i, stored + n, s);
  std::copy(grad + i, grad + n, g);
  if (kSlot) std::copy(acc + i, acc + n, a);
  Step8<kKernel, kBf16>(k, draws, s, g, a, i);
  std::copy(s, s + m, stored + i);
  if (kSlot) std::copy(a, a + m, acc + i);
}

}  // namespace

void StepNarrowRowAvx2(const RowKernel& k, uint16_t* stored, const float* grad,
                       float* acc, int64_t n, uint64_t seed) {
  const Draws8 draws(seed);
  if (k.kernel == Kernel::kScaled) {
    if (k.bf16) {
      StepRow<Kernel::kScaled, true>(k, draws, stored, grad, acc, n);
    } else {
      StepRow<Kernel::kScaled, false>(k, draws, stored, grad, acc, n);
    }
  } else if (k.bf16) {
    StepRow<Kernel::kAdagrad, true>(k, draws, stored, grad, acc, n);
  } else {
    StepRow<Kernel::kAdagrad, false>(k, draws, stored, grad, acc, n);
  }
}

#else

void StepNarrowRowAvx2(const RowKernel&, uint16_t*, const float*, float*,
                       int64_t, uint64_t) {}

#endif

}  // namespace narrow_row_internal
}  // namespace tessera
