#ifndef TESSERA_WORKER_CUDA_NN_KERNELS_CUH_
#define TESSERA_WORKER_CUDA_NN_KERNELS_CUH_

// The kernels of the CUDA backend's layer-library ops (the second half of
// Backend, worker/backend.h, whose comments are their contracts), behind
// host-side launch functions, so that the backend's files keep its
// bookkeeping (stream, errors, cuBLAS, scratch) and not every kernel.
//
// Each function queues its work on `stream` and returns the error of the
// launch (cudaGetLastError), which the backend keeps sticky; arguments
// are the Backend op's, and sizes are assumed positive (the backend
// returns early on empty ones). Reductions accumulate in double, so the
// results are within rounding of the CPU backend's whatever its order;
// the scatter-adds of ScatterColumns use atomics (their order among
// repeated indices varies), Col2Im and MaxPoolBackward gather instead and
// add in the CPU's order.
//
// Included only by .cu files.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "worker/backend/backend.h"

namespace tessera {

// Launch geometry shared by every kernel of the CUDA backend: kThreads
// threads a block, at most 2^20 blocks, the rest covered by grid-stride
// loops.
constexpr int kThreads = 256;

inline int Blocks(int64_t n) {
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>((n + kThreads - 1) / kThreads, 1 << 20)));
}

// Grid-stride loop over [0, n).
#define TESSERA_FOR_EACH(i, n)                                          \
  for (int64_t i =                                                      \
           blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

cudaError_t LaunchFill(cudaStream_t stream, int64_t n, float value, float* x);
cudaError_t LaunchAxpby(cudaStream_t stream, int64_t n, float alpha,
                        const float* x, float beta, float* y);
cudaError_t LaunchMul(cudaStream_t stream, int64_t n, const float* a,
                      const float* b, float beta, float* out);
cudaError_t LaunchUnaryForward(cudaStream_t stream, Backend::Unary kind,
                               int64_t n, const float* x, float* y);
cudaError_t LaunchUnaryBackward(cudaStream_t stream, Backend::Unary kind,
                                int64_t n, const float* y, const float* dy,
                                float* dx);
cudaError_t LaunchSoftmaxForward(cudaStream_t stream, int64_t rows,
                                 int64_t cols, const float* x, float* y);
cudaError_t LaunchSoftmaxBackward(cudaStream_t stream, int64_t rows,
                                  int64_t cols, const float* y, const float* dy,
                                  float* dx);

// The elementwise half of MeanSquaredError over n = rows * cols floats:
// loss[i] = (pred[i] - target[i])^2 in double, and, if dpred is not null,
// dpred[i] = (pred[i] - target[i]) * grad_scale.
cudaError_t LaunchSquaredError(cudaStream_t stream, int64_t n,
                               const float* pred, const float* target,
                               float grad_scale, float* dpred, double* loss);

cudaError_t LaunchCopy2D(cudaStream_t stream, int64_t rows, int64_t cols,
                         const float* src, int64_t src_stride, float* dst,
                         int64_t dst_stride, float beta);
cudaError_t LaunchGatherColumns(cudaStream_t stream, int64_t rows,
                                int64_t in_cols, const float* x, int64_t n,
                                const int32_t* index, float* y);
cudaError_t LaunchScatterColumns(cudaStream_t stream, int64_t rows, int64_t n,
                                 const float* dy, const int32_t* index,
                                 int64_t out_cols, float* dx);
cudaError_t LaunchScaleRows(cudaStream_t stream, int64_t rows, int64_t cols,
                            const float* x, const float* s, float beta,
                            float* y);
cudaError_t LaunchRowDot(cudaStream_t stream, int64_t rows, int64_t cols,
                         const float* a, const float* b, float* out);

cudaError_t LaunchIm2Col(cudaStream_t stream, const Backend::Window2D& g,
                         const float* x, float* cols);
cudaError_t LaunchCol2Im(cudaStream_t stream, const Backend::Window2D& g,
                         const float* cols, float* dx);
cudaError_t LaunchMaxPoolForward(cudaStream_t stream,
                                 const Backend::Window2D& g, const float* x,
                                 float* y, int64_t* argmax);
cudaError_t LaunchMaxPoolBackward(cudaStream_t stream,
                                  const Backend::Window2D& g, const float* dy,
                                  const int64_t* argmax, float* dx);

cudaError_t LaunchColumnMoments(cudaStream_t stream, int64_t rows, int64_t cols,
                                const float* x, float* mean, float* var);
cudaError_t LaunchBatchNormForward(cudaStream_t stream, int64_t rows,
                                   int64_t cols, const float* x,
                                   const float* mean, const float* var,
                                   const float* gamma, const float* beta,
                                   float epsilon, float* y);
cudaError_t LaunchBatchNormBackward(cudaStream_t stream, int64_t rows,
                                    int64_t cols, const float* x,
                                    const float* mean, const float* var,
                                    const float* gamma, float epsilon,
                                    const float* dy, float* dx, float* dgamma,
                                    float* dbeta);
cudaError_t LaunchLayerNormForward(cudaStream_t stream, int64_t rows,
                                   int64_t cols, const float* x,
                                   const float* gamma, const float* beta,
                                   float epsilon, float* y, float* mean,
                                   float* rstd);
cudaError_t LaunchLayerNormBackward(cudaStream_t stream, int64_t rows,
                                    int64_t cols, const float* x,
                                    const float* mean, const float* rstd,
                                    const float* gamma, const float* dy,
                                    float* dx, float* dgamma, float* dbeta);

cudaError_t LaunchFmOrder2Forward(cudaStream_t stream, int64_t batch,
                                  int64_t fields, int64_t dim, const float* x,
                                  float* y);
cudaError_t LaunchFmOrder2Backward(cudaStream_t stream, int64_t batch,
                                   int64_t fields, int64_t dim, const float* x,
                                   const float* dy, float* dx);

}  // namespace tessera

#endif  // TESSERA_WORKER_CUDA_NN_KERNELS_CUH_
