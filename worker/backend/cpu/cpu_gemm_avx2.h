// The CPU backend's matrix product built for AVX2 and FMA as well as for
// the baseline x86-64 the rest of the build targets (no -march), picked at
// run time: Eigen chooses its SIMD width when it is compiled, so without
// this the products ran 4 floats wide with no FMA, about a third of the
// speed of the same GEMM with AVX2 and FMA (the MLP's prediction was 0.25x
// ONNX Runtime's, whose MLAS dispatches at run time; bench/results/
// predict_throughput.md).
#ifndef TESSERA_WORKER_BACKEND_CPU_CPU_GEMM_AVX2_H_
#define TESSERA_WORKER_BACKEND_CPU_CPU_GEMM_AVX2_H_

#include <cstdint>

namespace tessera {
namespace cpu_internal {

// Whether this build has GemmAvx2 and this CPU runs it (checked once; in
// cpu_backend.cc, which is built for the baseline).
bool UseGemmAvx2();

// CpuBackend::Gemm's contract, in AVX2 and FMA instructions. Only when
// UseGemmAvx2().
void GemmAvx2(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
              int64_t k, float alpha, const float* a, const float* b,
              float beta, float* c);

}  // namespace cpu_internal
}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CPU_CPU_GEMM_AVX2_H_
