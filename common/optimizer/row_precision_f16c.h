// The vector paths of row_precision.h (built with AVX2 and F16C), picked at
// run time by row_precision.cc: a server widens and rounds every row of a
// narrow table it touches, and a worker every row it pulls or pushes in 2
// bytes. fp16 conversions take 8 values per F16C instruction; the
// stochastic roundings draw their random numbers 8 at a time, the same
// 64-bit counter hash as CounterUniform (common/counter_rng.h), in AVX-512
// (whose 64-bit multiply does it in one instruction) where the CPU has it
// and in AVX2 otherwise. Every path gives the baseline code's bits for
// every finite value and infinity (NaN stays NaN; its payload may differ),
// so a table rounds the same on any server.
#ifndef TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_F16C_H_
#define TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_F16C_H_

#include <cstdint>

namespace tessera {
namespace row_precision_internal {

// Whether this build has the F16C paths and this CPU runs them (checked
// once, in row_precision.cc, which is built for the baseline).
bool UseF16c();

// Whether the stochastic roundings draw with AVX-512 (this build has the
// path, and the CPU has AVX-512 F, DQ and VL). Only meaningful when
// UseF16c().
bool UseAvx512Draws();

// How the stochastic roundings below draw: the fastest the CPU has, or one
// path named (tests hold each to the scalar rule). kAvx512 only when
// UseAvx512Draws().
enum class Draws { kBest, kAvx2, kAvx512 };

// dst[0, n) = the fp16 values src[0, n) as floats. Only when UseF16c().
void WidenHalfF16c(const uint16_t* src, float* dst, int64_t n);

// dst[0, n) = src[0, n) rounded to the nearest fp16 (ties to even), finite
// values beyond 65504 saturating there. Only when UseF16c().
void NarrowHalfNearestF16c(const float* src, uint16_t* dst, int64_t n);

// dst[0, n) = src[0, n) rounded stochastically as NarrowRowStochastic
// (ROW_FP16) does, bit for bit: the same draws CounterUniform(seed, i),
// the same neighbours and the same probability, 8 values at a time. Only
// when UseF16c().
void NarrowHalfStochasticF16c(const float* src, uint16_t* dst, int64_t n,
                              uint64_t seed, Draws draws = Draws::kBest);

// The same for ROW_BF16: RoundBfloat16Stochastic(src[i], CounterHash(seed,
// i) >> 48), bit for bit. Only when UseF16c().
void NarrowBfloat16StochasticAvx2(const float* src, uint16_t* dst, int64_t n,
                                  uint64_t seed, Draws draws = Draws::kBest);

}  // namespace row_precision_internal
}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_F16C_H_
