// CpuBackend::Dropout's mask, four elements per instruction: the same
// 64-bit counter hash as CounterUniform (common/counter_rng.h), with its
// 64-bit products made of 32-bit ones (AVX2 has no 64-bit multiply), so
// every element gets the bits of the scalar formula. Built with -mavx2
// beside the baseline build and picked at run time, as the GEMM is.
#ifndef TESSERA_WORKER_BACKEND_CPU_CPU_DROPOUT_AVX2_H_
#define TESSERA_WORKER_BACKEND_CPU_CPU_DROPOUT_AVX2_H_

#include <cstdint>

namespace tessera {
namespace cpu_internal {

// Whether this build has DropoutAvx2 and this CPU runs it (checked once).
bool UseDropoutAvx2();

// For i in [0, n - n % 4): x[i] = CounterUniform(seed, i) >= rate ?
// x[i] * scale : 0. Returns the number of elements done (the caller does
// the rest). Only when UseDropoutAvx2().
int64_t DropoutAvx2(uint64_t seed, float rate, float scale, int64_t n,
                    float* x);

}  // namespace cpu_internal
}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CPU_CPU_DROPOUT_AVX2_H_
