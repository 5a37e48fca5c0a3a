#ifndef TESSERA_WORKER_BACKEND_CUDA_CUDA_CORE_KERNELS_CUH_
#define TESSERA_WORKER_BACKEND_CUDA_CUDA_CORE_KERNELS_CUH_

// The kernels of the CUDA backend's training ops (the first half of
// Backend, worker/backend/backend.h, whose comments are their contracts:
// bias, ReLU, dropout, the two cross-entropy losses, embedding bags and the
// segment sums of sparse gradients), behind host-side launch functions as
// in cuda_nn_kernels.cuh. Each element's arithmetic is the CPU backend's,
// in the same order, so results are identical to it.
//
// Each function queues its work on `stream` and returns the error of the
// launch (cudaGetLastError); sizes are assumed positive. Included only by
// .cu files.

#include <cuda_runtime.h>

#include <cstdint>

namespace tessera {

// Whether this build's kernels can run on the current device: an error
// when the GPU is older than every architecture the build has code for
// (and than its PTX), which answers every call but cannot launch a kernel.
cudaError_t KernelImageError();

cudaError_t LaunchAddBias(cudaStream_t stream, const float* bias, int64_t rows,
                          int64_t cols, float* x);
cudaError_t LaunchRelu(cudaStream_t stream, int64_t n, float* x);
cudaError_t LaunchReluGrad(cudaStream_t stream, const float* y, int64_t n,
                           float* dy);
// Keeps x[i] (times `scale`) where the counter RNG's draw for i is at least
// `rate`, as the CPU backend does.
cudaError_t LaunchDropout(cudaStream_t stream, uint64_t seed, float rate,
                          float scale, int64_t n, float* x);
// Per row: its loss in `row_loss` and whether its arg-max is its label in
// `row_hit`; `dlogits` (if not null) gets the mean loss's gradient.
cudaError_t LaunchSoftmaxXent(cudaStream_t stream, const float* logits,
                              const int32_t* labels, int64_t rows,
                              int64_t classes, float inv_rows, float* dlogits,
                              double* row_loss, int64_t* row_hit);
// Per element: its loss in `loss`; `dlogits` (if not null) the gradient.
cudaError_t LaunchSigmoidXent(cudaStream_t stream, const float* logits,
                              const float* targets, int64_t n, float inv_rows,
                              float* dlogits, double* loss);
cudaError_t LaunchEmbeddingBagForward(cudaStream_t stream, const float* table,
                                      int64_t dim, const int64_t* offsets,
                                      const int64_t* ids, int64_t bags,
                                      bool mean, float* out, int64_t stride);
cudaError_t LaunchEmbeddingBagBackward(cudaStream_t stream, const float* dout,
                                       int64_t dim, const int64_t* offsets,
                                       int64_t bags, bool mean, float* drows,
                                       int64_t stride);
// out[s] = the sum of rows[order[j]] for j in [starts[s], starts[s] +
// counts[s]), in that order.
cudaError_t LaunchSegmentSumRows(cudaStream_t stream, const float* rows,
                                 int64_t dim, const int64_t* order,
                                 const int64_t* starts, const int64_t* counts,
                                 int64_t segments, float* out);

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CUDA_CUDA_CORE_KERNELS_CUH_
