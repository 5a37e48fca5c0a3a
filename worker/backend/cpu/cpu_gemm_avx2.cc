// Built with -mavx2 -mfma (worker/backend/cpu/CMakeLists.txt) on x86-64.
// Eigen's namespace is renamed here, so none of the Eigen code this file
// instantiates in AVX2 shares a symbol with the baseline build's: the
// linker cannot hand an AVX2 copy of a template to code that runs on a CPU
// without it (`nm` on this object lists no weak symbol outside it).
#include "worker/backend/cpu/cpu_gemm_avx2.h"

#if defined(TESSERA_GEMM_AVX2)
#define Eigen tessera_eigen_avx2
#include "Eigen/Core"
#undef Eigen
#endif

namespace tessera {
namespace cpu_internal {

#if defined(TESSERA_GEMM_AVX2)

void GemmAvx2(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
              int64_t k, float alpha, const float* a, const float* b,
              float beta, float* c) {
  using RowMajor =
      tessera_eigen_avx2::Matrix<float, tessera_eigen_avx2::Dynamic,
                                 tessera_eigen_avx2::Dynamic,
                                 tessera_eigen_avx2::RowMajor>;
  tessera_eigen_avx2::Map<const RowMajor> A(a, transpose_a ? k : m,
                                            transpose_a ? m : k);
  tessera_eigen_avx2::Map<const RowMajor> B(b, transpose_b ? n : k,
                                            transpose_b ? k : n);
  tessera_eigen_avx2::Map<RowMajor> C(c, m, n);
  if (beta == 0.0f) {
    C.setZero();
  } else if (beta != 1.0f) {
    C *= beta;
  }
  if (!transpose_a && !transpose_b) {
    C.noalias() += alpha * A * B;
  } else if (transpose_a && !transpose_b) {
    C.noalias() += alpha * A.transpose() * B;
  } else if (!transpose_a && transpose_b) {
    C.noalias() += alpha * A * B.transpose();
  } else {
    C.noalias() += alpha * A.transpose() * B.transpose();
  }
}

#else

void GemmAvx2(bool, bool, int64_t, int64_t, int64_t, float, const float*,
              const float*, float, float*) {}

#endif

}  // namespace cpu_internal
}  // namespace tessera
