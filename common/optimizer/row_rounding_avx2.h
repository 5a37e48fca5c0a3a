// The stochastic roundings of row_precision.h, 8 values at a time, for
// the files built with AVX2 and F16C (row_precision_f16c.cc, which rounds
// whole rows, and narrow_row_step_avx2.cc, which rounds a row as its
// optimizer step makes it, without an fp32 copy). One definition, so both
// give the baseline rule's bits: the draws CounterUniform(seed, i) and
// CounterHash(seed, i) >> 48, the same neighbours, the same probability.
// Include only from a file built with -mavx2 -mf16c.
#ifndef TESSERA_COMMON_OPTIMIZER_ROW_ROUNDING_AVX2_H_
#define TESSERA_COMMON_OPTIMIZER_ROW_ROUNDING_AVX2_H_

#include <immintrin.h>

#include <cstdint>

#include "common/counter_rng.h"
#include "common/optimizer/row_precision.h"

namespace tessera {
namespace row_rounding_avx2 {

// CounterHash(seed, i) (common/counter_rng.h) is mix(seed * K + C + i):
// the part before i is one number per row, and mix is SplitMix64's
// finaliser, whose constants these are.
inline uint64_t CounterBase(uint64_t seed) {
  return seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull;
}
constexpr uint64_t kMix1 = 0xBF58476D1CE4E5B9ull;
constexpr uint64_t kMix2 = 0x94D049BB133111EBull;

// Both draw kinds give, for 8 consecutive counters i..i+7 of one row,
// CounterHash(seed, i + j) >> kShift (kShift >= 32) as eight 32-bit lanes.

// AVX2 has no 64-bit multiply: each is made of three 32-bit ones, four
// lanes at a time.
class DrawsAvx2 {
 public:
  explicit DrawsAvx2(uint64_t seed)
      : base_(CounterBase(seed)),
        mix1_lo_(_mm256_set1_epi64x(kMix1 & 0xFFFFFFFFu)),
        mix1_hi_(_mm256_set1_epi64x(kMix1 >> 32)),
        mix2_lo_(_mm256_set1_epi64x(kMix2 & 0xFFFFFFFFu)),
        mix2_hi_(_mm256_set1_epi64x(kMix2 >> 32)) {}

  template <int kShift>
  __m256i Bits(int64_t i) const {
    const __m256i low = Hash4<kShift>(i);
    const __m256i high = Hash4<kShift>(i + 4);
    // The low dword of each 64-bit lane: 0, 2 of each 128-bit half.
    const __m256i both = _mm256_castps_si256(
        _mm256_shuffle_ps(_mm256_castsi256_ps(low), _mm256_castsi256_ps(high),
                          _MM_SHUFFLE(2, 0, 2, 0)));
    // Lanes are now 0 1 4 5 2 3 6 7: put them in order.
    return _mm256_permute4x64_epi64(both, _MM_SHUFFLE(3, 1, 2, 0));
  }

 private:
  // The low 64 bits of a * c, c given as its 32-bit halves.
  static __m256i MulLo64(__m256i a, __m256i c_lo, __m256i c_hi) {
    const __m256i lo = _mm256_mul_epu32(a, c_lo);
    const __m256i cross =
        _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo),
                         _mm256_mul_epu32(a, c_hi));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
  }

  template <int kShift>
  __m256i Hash4(int64_t i) const {
    __m256i z =
        _mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(base_ + i)),
                         _mm256_setr_epi64x(0, 1, 2, 3));
    z = MulLo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), mix1_lo_,
                mix1_hi_);
    z = MulLo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), mix2_lo_,
                mix2_hi_);
    return _mm256_srli_epi64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 31)),
                             kShift);
  }

  const uint64_t base_;
  const __m256i mix1_lo_, mix1_hi_, mix2_lo_, mix2_hi_;
};

// AVX-512 DQ multiplies 64-bit lanes: eight lanes, two multiplies.
#define TESSERA_AVX512_DRAWS \
  __attribute__((target("avx512f,avx512dq,avx512vl")))
class DrawsAvx512 {
 public:
  explicit DrawsAvx512(uint64_t seed) : base_(CounterBase(seed)) {}

  template <int kShift>
  TESSERA_AVX512_DRAWS __m256i Bits(int64_t i) const {
    __m512i z =
        _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(base_ + i)),
                         _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, Srli<30>(z)),
                           _mm512_set1_epi64(static_cast<int64_t>(kMix1)));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, Srli<27>(z)),
                           _mm512_set1_epi64(static_cast<int64_t>(kMix2)));
    z = _mm512_xor_si512(z, Srli<31>(z));
    return _mm512_maskz_cvtepi64_epi32(kAll, Srli<kShift>(z));
  }

 private:
  // The zero-masked forms of the shift and the narrowing, all lanes on:
  // GCC 12's plain ones start from _mm512_undefined_*, which
  // -Wmaybe-uninitialized reports.
  static constexpr __mmask8 kAll = 0xFF;
  template <int kBits>
  TESSERA_AVX512_DRAWS static __m512i Srli(__m512i z) {
    return _mm512_maskz_srli_epi64(kAll, z, kBits);
  }

  const uint64_t base_;
};

// CounterUniform(seed, i + j), j in [0, 8): the top 24 bits, scaled.
template <class D>
__attribute__((always_inline)) inline __m256 Uniform8(const D& draws,
                                                      int64_t i) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(draws.template Bits<40>(i)),
                       _mm256_set1_ps(1.0f / 16777216.0f));
}

// The fp16 bits of x[j] rounded stochastically with CounterUniform(seed,
// i + j): RoundHalfStochastic's rule, lane by lane.
template <class D>
__attribute__((always_inline)) inline __m128i RoundHalf8(const D& draws,
                                                         __m256 x, int64_t i,
                                                         uint64_t seed) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign, x);
  // NaN, infinities and what saturates: the scalar rule, rarely taken.
  if (_mm256_movemask_ps(
          _mm256_cmp_ps(a, _mm256_set1_ps(65504.0f), _CMP_LT_OQ)) != 0xFF) {
    alignas(32) float v[8];
    alignas(16) uint16_t out[8];
    _mm256_store_ps(v, x);
    for (int j = 0; j < 8; ++j) {
      out[j] = RoundHalfStochastic(v[j], CounterUniform(seed, i + j));
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
        _mm256_xor_si256(draws.template Bits<51>(i), _mm256_set1_epi32(0x1FFF));
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

// The bf16 bits of x[j] rounded stochastically with CounterHash(seed, i +
// j) >> 48: RoundBfloat16Stochastic's rule, lane by lane (16 random bits
// added below the kept ones, then truncated; a carry into infinity
// saturates).
template <class D>
__attribute__((always_inline)) inline __m128i RoundBfloat16x8(const D& draws,
                                                              __m256 x,
                                                              int64_t i,
                                                              uint64_t seed) {
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
      out[j] = RoundBfloat16Stochastic(
          v[j], static_cast<uint32_t>(CounterHash(seed, i + j) >> 48));
    }
    return _mm_load_si128(reinterpret_cast<const __m128i*>(out));
  }
  const __m256i infinity16 = _mm256_set1_epi32(0x7F80);
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, draws.template Bits<48>(i)), 16);
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
