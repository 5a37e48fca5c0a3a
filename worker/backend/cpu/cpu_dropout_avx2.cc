// Built with -mavx2 (worker/backend/cpu/CMakeLists.txt) on x86-64.
#include "worker/backend/cpu/cpu_dropout_avx2.h"

#if defined(TESSERA_DROPOUT_AVX2)
#include <immintrin.h>
#endif

namespace tessera {
namespace cpu_internal {

#if defined(TESSERA_DROPOUT_AVX2)

namespace {

// The low 64 bits of a * c in each lane, c given as its two 32-bit halves.
inline __m256i MulLo64(__m256i a, __m256i c_lo, __m256i c_hi) {
  const __m256i lo = _mm256_mul_epu32(a, c_lo);
  const __m256i cross =
      _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo),
                       _mm256_mul_epu32(a, c_hi));
  return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

inline __m256i Halves(uint64_t c, __m256i* hi) {
  *hi = _mm256_set1_epi64x(static_cast<int64_t>(c >> 32));
  return _mm256_set1_epi64x(static_cast<int64_t>(c & 0xFFFFFFFFu));
}

}  // namespace

int64_t DropoutAvx2(uint64_t seed, float rate, float scale, int64_t n,
                    float* x) {
  // CounterHash(seed, i) = mix(seed * K1 + i + K2); the part before i is
  // one number for the whole call.
  const uint64_t base = seed * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull;
  __m256i k2_hi, k3_hi;
  const __m256i k2_lo = Halves(0xBF58476D1CE4E5B9ull, &k2_hi);
  const __m256i k3_lo = Halves(0x94D049BB133111EBull, &k3_hi);
  // The low 32 bits of each 64-bit lane, in order, in the low 128 bits.
  const __m256i low_dwords = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
  const __m128 unit = _mm_set1_ps(1.0f / 16777216.0f);
  const __m128 rate4 = _mm_set1_ps(rate);
  const __m128 scale4 = _mm_set1_ps(scale);
  __m256i z0 = _mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(base)),
                                _mm256_setr_epi64x(0, 1, 2, 3));
  const __m256i four = _mm256_set1_epi64x(4);
  const int64_t end = n - n % 4;
  for (int64_t i = 0; i < end; i += 4) {
    __m256i z = z0;
    z0 = _mm256_add_epi64(z0, four);
    z = MulLo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), k2_lo, k2_hi);
    z = MulLo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), k3_lo, k3_hi);
    z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
    const __m256i top24 = _mm256_srli_epi64(z, 40);
    const __m128i packed =
        _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(top24, low_dwords));
    const __m128 u = _mm_mul_ps(_mm_cvtepi32_ps(packed), unit);
    const __m128 keep = _mm_cmp_ps(u, rate4, _CMP_GE_OQ);
    const __m128 v = _mm_mul_ps(_mm_loadu_ps(x + i), scale4);
    _mm_storeu_ps(x + i, _mm_and_ps(keep, v));
  }
  return end;
}

#else

int64_t DropoutAvx2(uint64_t, float, float, int64_t, float*) { return 0; }

#endif

}  // namespace cpu_internal
}  // namespace tessera
