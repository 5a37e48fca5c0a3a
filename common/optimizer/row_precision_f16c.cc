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

namespace {

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

template <class D>
__attribute__((always_inline)) inline void NarrowHalfStochastic(
    const D& draws, const float* src, uint16_t* dst, int64_t n, uint64_t seed) {
  const __m256 most = _mm256_set1_ps(65504.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m128i one = _mm_set1_epi16(1);
  const __m256i two_pow_zero_squared = _mm256_set1_epi32(254 << 23);
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
    // high - low is a power of two (2^-24 .. 2^5: neighbouring halves),
    // so dividing by it is multiplying by its reciprocal, exactly: the
    // scalar rule's quotient, bit for bit. A power of two's reciprocal
    // mirrors its exponent about 127.
    const __m256 reciprocal = _mm256_castsi256_ps(_mm256_sub_epi32(
        two_pow_zero_squared, _mm256_castps_si256(_mm256_sub_ps(high, low))));
    // p = 0 when a == low, and a draw in [0, 1) is never below it.
    const __m256 p = _mm256_mul_ps(_mm256_sub_ps(a, low), reciprocal);
    const __m256 up = _mm256_cmp_ps(Uniform8(draws, i), p, _CMP_LT_OQ);
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

// RoundBfloat16Stochastic 8 at a time: 16 random bits added below the
// kept ones, then truncated; a carry into infinity saturates.
template <class D>
__attribute__((always_inline)) inline void NarrowBfloat16Stochastic(
    const D& draws, const float* src, uint16_t* dst, int64_t n, uint64_t seed) {
  const __m256i exponent = _mm256_set1_epi32(0x7F800000);
  const __m256i infinity16 = _mm256_set1_epi32(0x7F80);
  const __m256i sign16 = _mm256_set1_epi32(0x8000);
  const __m256i most16 = _mm256_set1_epi32(0x7F7F);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    // NaN and infinities: the scalar rule, rarely taken.
    if (!_mm256_testz_si256(
            _mm256_cmpeq_epi32(_mm256_and_si256(bits, exponent), exponent),
            _mm256_cmpeq_epi32(exponent, exponent))) {
      for (int64_t j = i; j < i + 8; ++j) {
        dst[j] = RoundBfloat16Stochastic(
            src[j], static_cast<uint32_t>(CounterHash(seed, j) >> 48));
      }
      continue;
    }
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(bits, draws.template Bits<48>(i)), 16);
    const __m256i overflow =
        _mm256_cmpeq_epi32(_mm256_and_si256(rounded, infinity16), infinity16);
    const __m256i saturated = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi32(bits, 16), sign16), most16);
    const __m256i out = _mm256_blendv_epi8(rounded, saturated, overflow);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_packus_epi32(_mm256_castsi256_si128(out),
                                      _mm256_extracti128_si256(out, 1)));
  }
  for (; i < n; ++i) {
    dst[i] = RoundBfloat16Stochastic(
        src[i], static_cast<uint32_t>(CounterHash(seed, i) >> 48));
  }
}

void NarrowHalfStochasticAvx2(const float* src, uint16_t* dst, int64_t n,
                              uint64_t seed) {
  NarrowHalfStochastic(DrawsAvx2(seed), src, dst, n, seed);
}

TESSERA_AVX512_DRAWS void NarrowHalfStochasticAvx512(const float* src,
                                                     uint16_t* dst, int64_t n,
                                                     uint64_t seed) {
  NarrowHalfStochastic(DrawsAvx512(seed), src, dst, n, seed);
}

void NarrowBfloat16StochasticWithAvx2(const float* src, uint16_t* dst,
                                      int64_t n, uint64_t seed) {
  NarrowBfloat16Stochastic(DrawsAvx2(seed), src, dst, n, seed);
}

TESSERA_AVX512_DRAWS void NarrowBfloat16StochasticWithAvx512(const float* src,
                                                             uint16_t* dst,
                                                             int64_t n,
                                                             uint64_t seed) {
  NarrowBfloat16Stochastic(DrawsAvx512(seed), src, dst, n, seed);
}

bool Avx512(Draws draws) {
  return draws == Draws::kAvx512 || (draws == Draws::kBest && UseAvx512Draws());
}

}  // namespace

void NarrowHalfStochasticF16c(const float* src, uint16_t* dst, int64_t n,
                              uint64_t seed, Draws draws) {
  if (Avx512(draws)) {
    NarrowHalfStochasticAvx512(src, dst, n, seed);
  } else {
    NarrowHalfStochasticAvx2(src, dst, n, seed);
  }
}

void NarrowBfloat16StochasticAvx2(const float* src, uint16_t* dst, int64_t n,
                                  uint64_t seed, Draws draws) {
  if (Avx512(draws)) {
    NarrowBfloat16StochasticWithAvx512(src, dst, n, seed);
  } else {
    NarrowBfloat16StochasticWithAvx2(src, dst, n, seed);
  }
}

#else

void NarrowHalfStochasticF16c(const float*, uint16_t*, int64_t, uint64_t,
                              Draws) {}
void NarrowBfloat16StochasticAvx2(const float*, uint16_t*, int64_t, uint64_t,
                                  Draws) {}
void WidenHalfF16c(const uint16_t*, float*, int64_t) {}
void NarrowHalfNearestF16c(const float*, uint16_t*, int64_t) {}

#endif

}  // namespace row_precision_internal
}  // namespace tessera
