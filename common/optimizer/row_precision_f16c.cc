#include "common/optimizer/row_precision_f16c.h"

#ifdef TESSERA_ROW_PRECISION_F16C
#include <immintrin.h>

#include <cmath>

#include "common/counter_rng.h"
#include "common/optimizer/row_precision.h"
#endif

namespace tessera {
namespace row_precision_internal {

#ifdef TESSERA_ROW_PRECISION_F16C

namespace {

// Finite values beyond fp16's range saturate (as the stochastic rounding
// does) instead of overflowing to infinity; infinities and NaN pass.
inline float Saturate(float x) {
  if (std::isfinite(x) && std::fabs(x) > 65504.0f) {
    return std::signbit(x) ? -65504.0f : 65504.0f;
  }
  return x;
}

}  // namespace

void WidenHalfF16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

void NarrowHalfNearestF16c(const float* src, uint16_t* dst, int64_t n) {
  const __m256 most = _mm256_set1_ps(65504.0f);
  const __m256 least = _mm256_set1_ps(-65504.0f);
  const __m256 infinity = _mm256_set1_ps(INFINITY);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    // MINPS/MAXPS return their second operand when either is NaN, so NaN
    // stays NaN here; infinities are put back after the clamp.
    const __m256 clamped = _mm256_max_ps(least, _mm256_min_ps(most, x));
    const __m256 is_inf =
        _mm256_cmp_ps(_mm256_andnot_ps(sign, x), infinity, _CMP_EQ_OQ);
    const __m256 y = _mm256_blendv_ps(clamped, x, is_inf);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) {
    dst[i] = _cvtss_sh(Saturate(src[i]), _MM_FROUND_TO_NEAREST_INT);
  }
}

void NarrowHalfStochasticF16c(const float* src, uint16_t* dst, int64_t n,
                              uint64_t seed) {
  const __m256 most = _mm256_set1_ps(65504.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m128i one = _mm_set1_epi16(1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    const __m256 a = _mm256_andnot_ps(sign, x);
    // NaN, infinities and what saturates: the scalar rule, rarely taken.
    if (_mm256_movemask_ps(_mm256_cmp_ps(a, most, _CMP_LT_OQ)) != 0xFF) {
      for (int64_t j = i; j < i + 8; ++j) {
        dst[j] = RoundHalfStochastic(src[j], CounterUniform(seed, j));
      }
      continue;
    }
    alignas(32) float draws[8];
    for (int j = 0; j < 8; ++j) draws[j] = CounterUniform(seed, i + j);
    // lo: the magnitude rounded to nearest, then down a step when that
    // went up, so lo <= a < lo + 1 as halves (subnormals included).
    __m128i lo = _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT);
    const __m256 above = _mm256_cmp_ps(_mm256_cvtph_ps(lo), a, _CMP_GT_OQ);
    const __m256i above32 = _mm256_castps_si256(above);
    lo = _mm_add_epi16(lo,
                       _mm_packs_epi32(_mm256_castsi256_si128(above32),
                                       _mm256_extractf128_si256(above32, 1)));
    const __m256 low = _mm256_cvtph_ps(lo);
    const __m256 high = _mm256_cvtph_ps(_mm_add_epi16(lo, one));
    // p = 0 when a == low, and a draw in [0, 1) is never below it.
    const __m256 p =
        _mm256_div_ps(_mm256_sub_ps(a, low), _mm256_sub_ps(high, low));
    const __m256 up = _mm256_cmp_ps(_mm256_load_ps(draws), p, _CMP_LT_OQ);
    const __m256i up32 = _mm256_castps_si256(up);
    // up lanes are -1: subtracting them adds one.
    __m128i out =
        _mm_sub_epi16(lo, _mm_packs_epi32(_mm256_castsi256_si128(up32),
                                          _mm256_extractf128_si256(up32, 1)));
    const __m256i sign32 =
        _mm256_srli_epi32(_mm256_castps_si256(_mm256_and_ps(x, sign)), 16);
    out = _mm_or_si128(out,
                       _mm_packus_epi32(_mm256_castsi256_si128(sign32),
                                        _mm256_extractf128_si256(sign32, 1)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), out);
  }
  for (; i < n; ++i) {
    dst[i] = RoundHalfStochastic(src[i], CounterUniform(seed, i));
  }
}

#else

void NarrowHalfStochasticF16c(const float*, uint16_t*, int64_t, uint64_t) {}
void WidenHalfF16c(const uint16_t*, float*, int64_t) {}
void NarrowHalfNearestF16c(const float*, uint16_t*, int64_t) {}

#endif

}  // namespace row_precision_internal
}  // namespace tessera
