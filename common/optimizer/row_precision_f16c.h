// The vector paths of row_precision.h (built with AVX2 and F16C), picked at
// run time by row_precision.cc: a server widens and rounds every row of a
// narrow table it touches, and a worker every row it pulls or pushes in 2
// bytes. fp16 conversions take 8 values per F16C instruction; the
// stochastic roundings draw their random numbers 8 at a time
// (RowRoundingBits in 32-bit lanes). Every path gives the baseline code's
// bits for every finite value and infinity (NaN stays NaN; its payload may
// differ), so a table rounds the same on any server.
#ifndef TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_F16C_H_
#define TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_F16C_H_

#include <cstdint>

namespace tessera {
namespace row_precision_internal {

// Whether this build has the F16C paths and this CPU runs them (checked
// once, in row_precision.cc, which is built for the baseline).
bool UseF16c();

// dst[0, n) = the fp16 values src[0, n) as floats. Only when UseF16c().
void WidenHalfF16c(const uint16_t* src, float* dst, int64_t n);

// dst[0, n) = src[0, n) rounded to the nearest fp16 (ties to even), finite
// values beyond 65504 saturating there. Only when UseF16c().
void NarrowHalfNearestF16c(const float* src, uint16_t* dst, int64_t n);

// dst[0, n) = src[0, n) rounded stochastically as NarrowRowStochastic
// (ROW_FP16) does, bit for bit: the same draws, the same neighbours and
// the same probability, 8 values at a time. Only when UseF16c().
void NarrowHalfStochasticF16c(const float* src, uint16_t* dst, int64_t n,
                              uint64_t seed);

// The same for ROW_BF16, bit for bit. Only when UseF16c().
void NarrowBfloat16StochasticAvx2(const float* src, uint16_t* dst, int64_t n,
                                  uint64_t seed);

}  // namespace row_precision_internal
}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_F16C_H_
