// fp16 conversions with the F16C instructions (8 values per instruction;
// built with AVX2), picked at run time by row_precision.cc: a server widens and
// rounds every row of an fp16 table it touches, and a worker every row it pulls
// or pushes in fp16. They give the baseline code's bits for every finite value
// and infinity (NaN stays NaN; its payload may differ).
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
// (ROW_FP16) does, bit for bit: the same draws CounterUniform(seed, i),
// the same neighbours and the same probability arithmetic, 8 values at a
// time. Only when UseF16c().
void NarrowHalfStochasticF16c(const float* src, uint16_t* dst, int64_t n,
                              uint64_t seed);

}  // namespace row_precision_internal
}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_F16C_H_
