#include "common/optimizer/row_precision_f16c.h"

#ifdef TESSERA_ROW_PRECISION_F16C
#include <immintrin.h>

#include <cmath>

#include "common/optimizer/row_precision.h"
#include "common/optimizer/row_rounding_avx2.h"
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
  const row_rounding_avx2::Draws8 draws(seed);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst + i),
        row_rounding_avx2::RoundHalf8(draws, _mm256_loadu_ps(src + i), i));
  }
  for (; i < n; ++i) {
    dst[i] = RoundHalfAt(src[i], draws.key(), i);
  }
}

void NarrowBfloat16StochasticAvx2(const float* src, uint16_t* dst, int64_t n,
                                  uint64_t seed) {
  const row_rounding_avx2::Draws8 draws(seed);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst + i),
        row_rounding_avx2::RoundBfloat16x8(draws, _mm256_loadu_ps(src + i), i));
  }
  for (; i < n; ++i) {
    dst[i] = RoundBfloat16At(src[i], draws.key(), i);
  }
}

#else

void NarrowHalfStochasticF16c(const float*, uint16_t*, int64_t, uint64_t) {}
void NarrowBfloat16StochasticAvx2(const float*, uint16_t*, int64_t, uint64_t) {}
void WidenHalfF16c(const uint16_t*, float*, int64_t) {}
void NarrowHalfNearestF16c(const float*, uint16_t*, int64_t) {}

#endif

}  // namespace row_precision_internal
}  // namespace tessera
