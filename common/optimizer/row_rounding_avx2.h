// The stochastic roundings of row_precision.h, 8 values at a time, for
// the files built with AVX2 and F16C (row_precision_f16c.cc, which rounds
// whole rows, and narrow_row_step_avx2.cc, which rounds a row as its
// optimizer step makes it, without an fp32 copy). One definition, so both
// give the baseline rule's bits: the same draws (RowRoundingBits), the
// same neighbours, the same probability.
// Include only from a file built with -mavx2 -mf16c.
#ifndef TESSERA_COMMON_OPTIMIZER_ROW_ROUNDING_AVX2_H_
#define TESSERA_COMMON_OPTIMIZER_ROW_ROUNDING_AVX2_H_

#include <immintrin.h>

#include <cstdint>

#include "common/optimizer/row_precision.h"

namespace tessera {
namespace row_rounding_avx2 {

// The draws RowRoundingBits(key, i + j) (row_precision.h), j in [0, 8),
// as eight 32-bit lanes shifted right by kShift: the 32-bit hash's two
// multiplies are one AVX2 instruction each, where the 64-bit counter hash
// it replaced took three 32-bit ones per multiply and half the lanes
// (bench/results/tables.md).
class Draws8 {
 public:
  explicit Draws8(uint64_t seed)
      : key_(RowRoundingKey(seed)),
        steps_(_mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                  _mm256_set1_epi32(kStep))) {}

  uint32_t key() const { return key_; }

  template <int kShift>
  __m256i Bits(int64_t i) const {
    // key + (i + j) * golden, each lane wrapping as the scalar one does.
    __m256i z = _mm256_add_epi32(
        _mm256_set1_epi32(static_cast<int32_t>(key_ + static_cast<uint32_t>(i) *
                                                          kCounterHash32Step)),
        steps_);
    z = _mm256_xor_si256(z, _mm256_srli_epi32(z, 16));
    z = _mm256_mullo_epi32(z, _mm256_set1_epi32(kMix1));
    z = _mm256_xor_si256(z, _mm256_srli_epi32(z, 15));
    z = _mm256_mullo_epi32(z, _mm256_set1_epi32(kMix2));
    z = _mm256_xor_si256(z, _mm256_srli_epi32(z, 16));
    return _mm256_srli_epi32(z, kShift);
  }

 private:
  static constexpr int32_t kStep = static_cast<int32_t>(kCounterHash32Step);
  static constexpr int32_t kMix1 = static_cast<int32_t>(kCounterHash32Mix1);
  static constexpr int32_t kMix2 = static_cast<int32_t>(kCounterHash32Mix2);
  const uint32_t key_;
  const __m256i steps_;  // j * golden, j in [0, 8)
};

// RowRoundingUniform of the draws: their top 24 bits, scaled.
__attribute__((always_inline)) inline __m256 Uniform8(const Draws8& draws,
                                                      int64_t i) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(draws.Bits<8>(i)),
                       _mm256_set1_ps(1.0f / 16777216.0f));
}

// The fp16 bits of x[j] rounded stochastically with draw i + j:
// RoundHalfStochastic's rule, lane by lane.
__attribute__((always_inline)) inline __m128i RoundHalf8(const Draws8& draws,
                                                         __m256 x, int64_t i) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign, x);
  // NaN, infinities and what saturates: the scalar rule, rarely taken.
  if (_mm256_movemask_ps(
          _mm256_cmp_ps(a, _mm256_set1_ps(65504.0f), _CMP_LT_OQ)) != 0xFF) {
    alignas(32) float v[8];
    alignas(16) uint16_t out[8];
    _mm256_store_ps(v, x);
    for (int j = 0; j < 8; ++j) {
      out[j] = RoundHalfAt(v[j], draws.key(), i + j);
    }
    return _mm_load_si128(reinterpret_cast<const __m128i*>(out));
  }
  // Where every lane is a normal half's (2^-14 <= a), the rule is an
  // integer carry: a's 13 bits below the half's are k / 2^13 of the step
  // to the next half, p = k / 2^13 exactly, and the draw u = r / 2^24, so
  // u < p exactly when r >> 11 < k, which is when adding 0x1FFF - (r >>
  // 11) to the float's bits carries into the half's; truncating then
  // gives the rule's half, sign included.
  if (_mm256_movemask_ps(
          _mm256_cmp_ps(a, _mm256_set1_ps(0x1p-14f), _CMP_GE_OQ)) == 0xFF) {
    const __m256i up =
        _mm256_xor_si256(draws.Bits<19>(i), _mm256_set1_epi32(0x1FFF));
    return _mm256_cvtps_ph(
        _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(x), up)),
        _MM_FROUND_TO_ZERO);
  }
  // lo: the magnitude rounded to nearest, then down a step when that
  // went up, so lo <= a < lo + 1 as halves (subnormals included).
  __m128i lo = _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT);
  const __m256 above = _mm256_cmp_ps(_mm256_cvtph_ps(lo), a, _CMP_GT_OQ);
  const __m256i above32 = _mm256_castps_si256(above);
  lo = _mm_add_epi16(lo, _mm_packs_epi32(_mm256_castsi256_si128(above32),
                                         _mm256_extractf128_si256(above32, 1)));
  const __m256 low = _mm256_cvtph_ps(lo);
  const __m256 high = _mm256_cvtph_ps(_mm_add_epi16(lo, _mm_set1_epi16(1)));
  // high - low is a power of two (2^-24 .. 2^5: neighbouring halves), so
  // dividing by it is multiplying by its reciprocal, exactly: the scalar
  // rule's quotient, bit for bit. A power of two's reciprocal mirrors its
  // exponent about 127.
  const __m256 reciprocal = _mm256_castsi256_ps(
      _mm256_sub_epi32(_mm256_set1_epi32(254 << 23),
                       _mm256_castps_si256(_mm256_sub_ps(high, low))));
  // p = 0 when a == low, and a draw in [0, 1) is never below it.
  const __m256 p = _mm256_mul_ps(_mm256_sub_ps(a, low), reciprocal);
  const __m256 up = _mm256_cmp_ps(Uniform8(draws, i), p, _CMP_LT_OQ);
  const __m256i up32 = _mm256_castps_si256(up);
  // up lanes are -1: subtracting them adds one.
  const __m128i out =
      _mm_sub_epi16(lo, _mm_packs_epi32(_mm256_castsi256_si128(up32),
                                        _mm256_extractf128_si256(up32, 1)));
  const __m256i sign32 =
      _mm256_srli_epi32(_mm256_castps_si256(_mm256_and_ps(x, sign)), 16);
  return _mm_or_si128(out,
                      _mm_packus_epi32(_mm256_castsi256_si128(sign32),
                                       _mm256_extractf128_si256(sign32, 1)));
}

// The bf16 bits of x[j] rounded stochastically with the top 16 bits of
// draw i + j: RoundBfloat16Stochastic's rule, lane by lane (16 random bits
// added below the kept ones, then truncated; a carry into infinity
// saturates).
__attribute__((always_inline)) inline __m128i RoundBfloat16x8(
    const Draws8& draws, __m256 x, int64_t i) {
  const __m256i exponent = _mm256_set1_epi32(0x7F800000);
  const __m256i bits = _mm256_castps_si256(x);
  // NaN and infinities: the scalar rule, rarely taken.
  if (!_mm256_testz_si256(
          _mm256_cmpeq_epi32(_mm256_and_si256(bits, exponent), exponent),
          _mm256_cmpeq_epi32(exponent, exponent))) {
    alignas(32) float v[8];
    alignas(16) uint16_t out[8];
    _mm256_store_ps(v, x);
    for (int j = 0; j < 8; ++j) {
      out[j] = RoundBfloat16At(v[j], draws.key(), i + j);
    }
    return _mm_load_si128(reinterpret_cast<const __m128i*>(out));
  }
  const __m256i infinity16 = _mm256_set1_epi32(0x7F80);
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, draws.Bits<16>(i)), 16);
  const __m256i overflow =
      _mm256_cmpeq_epi32(_mm256_and_si256(rounded, infinity16), infinity16);
  const __m256i saturated = _mm256_or_si256(
      _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x8000)),
      _mm256_set1_epi32(0x7F7F));
  const __m256i out = _mm256_blendv_epi8(rounded, saturated, overflow);
  return _mm_packus_epi32(_mm256_castsi256_si128(out),
                          _mm256_extracti128_si256(out, 1));
}

}  // namespace row_rounding_avx2
}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_ROW_ROUNDING_AVX2_H_
