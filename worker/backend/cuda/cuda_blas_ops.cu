#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/cuda_backend_impl.cuh"
#include "worker/backend/cuda/cuda_nn_kernels.cuh"

namespace tessera {

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
void CudaBackend::Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const float* a, const float* b,
                       float beta, float* c) {
  if (m <= 0 || n <= 0 || !Ready()) return;
  if (!FitsInt("Gemm", {m, n, k})) return;
  const int lda = static_cast<int>(std::max<int64_t>(1, transpose_a ? m : k));
  const int ldb = static_cast<int>(std::max<int64_t>(1, transpose_b ? k : n));
  CheckBlas(cublas_->sgemm(blas_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                           transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                           static_cast<int>(n), static_cast<int>(m),
                           static_cast<int>(k), &alpha, b, ldb, a, lda, &beta,
                           c, static_cast<int>(n)),
            "cublasSgemm");
}

// Mapped to column-major as Gemm is; the strides carry over unchanged.
void CudaBackend::BatchedGemm(bool transpose_a, bool transpose_b, int64_t m,
                              int64_t n, int64_t k, float alpha, const float* a,
                              int64_t stride_a, const float* b,
                              int64_t stride_b, float beta, float* c,
                              int64_t stride_c, int64_t batch) {
  if (m <= 0 || n <= 0 || batch <= 0 || !Ready()) return;
  if (!FitsInt("BatchedGemm", {m, n, k, batch})) return;
  const int lda = static_cast<int>(std::max<int64_t>(1, transpose_a ? m : k));
  const int ldb = static_cast<int>(std::max<int64_t>(1, transpose_b ? k : n));
  CheckBlas(cublas_->sgemm_strided_batched(
                blas_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb,
                stride_b, a, lda, stride_a, &beta, c, static_cast<int>(n),
                stride_c, static_cast<int>(batch)),
            "cublasSgemmStridedBatched");
}

// dbias = dy^T * ones, a cuBLAS matrix-vector product.
void CudaBackend::BiasGrad(const float* dy, int64_t rows, int64_t cols,
                           float* dbias) {
  if (cols <= 0 || !Ready()) return;
  if (rows <= 0) {
    Check(cudaMemsetAsync(dbias, 0, cols * sizeof(float), stream_),
          "cudaMemsetAsync");
    return;
  }
  if (!FitsInt("BiasGrad", {rows, cols})) return;
  float* ones = static_cast<float*>(
      ScratchBytes(kOnes, rows * static_cast<int64_t>(sizeof(float))));
  if (ones == nullptr) return;
  if (ones_filled_ < rows) {
    if (!CheckLaunch("Fill", LaunchFill(stream_, rows, 1.0f, ones))) return;
    ones_filled_ = rows;
  }
  const float one = 1.0f, zero = 0.0f;
  CheckBlas(cublas_->sgemv(blas_, CUBLAS_OP_N, static_cast<int>(cols),
                           static_cast<int>(rows), &one, dy,
                           static_cast<int>(cols), ones, 1, &zero, dbias, 1),
            "cublasSgemv");
}

}  // namespace tessera
