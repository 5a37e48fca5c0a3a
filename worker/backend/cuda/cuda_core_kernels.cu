#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/counter_rng.h"
#include "worker/backend/cuda/cuda_core_kernels.cuh"
#include "worker/backend/cuda/cuda_nn_kernels.cuh"

namespace tessera {
namespace {

__global__ void AddBiasKernel(const float* bias, int64_t rows, int64_t cols,
                              float* x) {
  TESSERA_FOR_EACH(i, rows * cols) { x[i] += bias[i % cols]; }
}

// The same expressions as the CPU backend, so the results are identical.
__global__ void ReluKernel(int64_t n, float* x) {
  TESSERA_FOR_EACH(i, n) { x[i] = x[i] < 0.0f ? 0.0f : x[i]; }
}

__global__ void ReluGradKernel(const float* y, int64_t n, float* dy) {
  TESSERA_FOR_EACH(i, n) {
    if (y[i] <= 0.0f) dy[i] = 0.0f;
  }
}

__global__ void DropoutKernel(uint64_t seed, float rate, float scale, int64_t n,
                              float* x) {
  TESSERA_FOR_EACH(i, n) {
    x[i] = CounterUniform(seed, static_cast<uint64_t>(i)) >= rate ? x[i] * scale
                                                                  : 0.0f;
  }
}

// One warp per row: arg-max (first of equal maxima, as std::max_element),
// log-sum-exp in double, gradient of the mean loss.
__global__ void SoftmaxXentKernel(const float* logits, const int32_t* labels,
                                  int64_t rows, int64_t classes, float inv_rows,
                                  float* dlogits, double* row_loss,
                                  int64_t* row_hit) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t r =
           (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
       r < rows; r += warps) {
    const float* z = logits + r * classes;
    float best = -INFINITY;
    int64_t arg = INT64_MAX;
    for (int64_t c = lane; c < classes; c += 32) {
      if (arg == INT64_MAX || z[c] > best) {
        best = z[c];
        arg = c;
      }
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float other_best = __shfl_down_sync(kAll, best, off);
      const int64_t other_arg = __shfl_down_sync(kAll, arg, off);
      if (other_arg != INT64_MAX && (arg == INT64_MAX || other_best > best ||
                                     (other_best == best && other_arg < arg))) {
        best = other_best;
        arg = other_arg;
      }
    }
    best = __shfl_sync(kAll, best, 0);
    arg = __shfl_sync(kAll, arg, 0);
    double sum = 0;
    for (int64_t c = lane; c < classes; c += 32) sum += expf(z[c] - best);
    for (int off = 16; off > 0; off >>= 1) {
      sum += __shfl_down_sync(kAll, sum, off);
    }
    sum = __shfl_sync(kAll, sum, 0);
    const int32_t label = labels[r];
    if (lane == 0) {
      row_loss[r] = log(sum) - static_cast<double>(z[label] - best);
      row_hit[r] = arg == label ? 1 : 0;
    }
    if (dlogits != nullptr) {
      float* d = dlogits + r * classes;
      for (int64_t c = lane; c < classes; c += 32) {
        const float p = static_cast<float>(expf(z[c] - best) / sum);
        d[c] = (p - (c == label ? 1.0f : 0.0f)) * inv_rows;
      }
    }
  }
}

__global__ void SigmoidXentKernel(const float* logits, const float* targets,
                                  int64_t n, float inv_rows, float* dlogits,
                                  double* loss) {
  TESSERA_FOR_EACH(i, n) {
    const float z = logits[i], t = targets[i];
    // __fmul_rn keeps nvcc from fusing into an FMA the CPU does not do.
    loss[i] = fmaxf(z, 0.0f) - __fmul_rn(z, t) + log1pf(expf(-fabsf(z)));
    if (dlogits != nullptr) {
      const float sigmoid = 1.0f / (1.0f + expf(-z));
      dlogits[i] = (sigmoid - t) * inv_rows;
    }
  }
}

// The row kernels below put several rows (bags, segments) in one block:
// threadIdx.x runs along dim, threadIdx.y picks the row, so at the
// click models' dimensions of 8-32 every lane has work (one row per block
// left most of a 32-lane warp idle). Each element's arithmetic is the
// CPU's, in the same order.
__device__ int64_t FirstRow() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
}
__device__ int64_t RowStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.y;
}

// Sums a bag's rows in id order like the CPU.
__global__ void EmbeddingBagForwardKernel(const float* table, int64_t dim,
                                          const int64_t* offsets,
                                          const int64_t* ids, int64_t bags,
                                          bool mean, float* out,
                                          int64_t stride) {
  for (int64_t b = FirstRow(); b < bags; b += RowStride()) {
    const int64_t begin = offsets[b], end = offsets[b + 1];
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      float sum = 0.0f;
      for (int64_t j = begin; j < end; ++j) sum += table[ids[j] * dim + d];
      if (mean && end > begin) sum /= static_cast<float>(end - begin);
      out[b * stride + d] = sum;
    }
  }
}

__global__ void EmbeddingBagBackwardKernel(const float* dout, int64_t dim,
                                           const int64_t* offsets, int64_t bags,
                                           bool mean, float* drows,
                                           int64_t stride) {
  for (int64_t b = FirstRow(); b < bags; b += RowStride()) {
    const int64_t begin = offsets[b], end = offsets[b + 1];
    const float n = static_cast<float>(end - begin);
    for (int64_t j = begin; j < end; ++j) {
      for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
        const float g = dout[b * stride + d];
        drows[j * dim + d] = mean ? g / n : g;
      }
    }
  }
}

// Per distinct id: sums its rows in sorted (= original, the sort is
// stable) order.
__global__ void SegmentSumRowsKernel(const float* rows, int64_t dim,
                                     const int64_t* order,
                                     const int64_t* starts,
                                     const int64_t* counts, int64_t segments,
                                     float* out) {
  for (int64_t s = FirstRow(); s < segments; s += RowStride()) {
    const int64_t begin = starts[s], end = begin + counts[s];
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      float sum = 0.0f;
      for (int64_t j = begin; j < end; ++j) sum += rows[order[j] * dim + d];
      out[s * dim + d] = sum;
    }
  }
}

// Lanes per row: dim rounded up to a power of two, at most 128; rows per
// block so that a block has 256 threads.
dim3 RowThreads(int64_t dim) {
  int lanes = 1;
  while (lanes < dim && lanes < 128) lanes *= 2;
  return dim3(lanes, 256 / lanes);
}

int RowBlocks(int64_t rows, int64_t dim) {
  const int64_t per_block = RowThreads(dim).y;
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>((rows + per_block - 1) / per_block, 1 << 20)));
}

}  // namespace

cudaError_t KernelImageError() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, ReluKernel);
}

cudaError_t LaunchAddBias(cudaStream_t stream, const float* bias, int64_t rows,
                          int64_t cols, float* x) {
  AddBiasKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(bias, rows, cols,
                                                              x);
  return cudaGetLastError();
}

cudaError_t LaunchRelu(cudaStream_t stream, int64_t n, float* x) {
  ReluKernel<<<Blocks(n), kThreads, 0, stream>>>(n, x);
  return cudaGetLastError();
}

cudaError_t LaunchReluGrad(cudaStream_t stream, const float* y, int64_t n,
                           float* dy) {
  ReluGradKernel<<<Blocks(n), kThreads, 0, stream>>>(y, n, dy);
  return cudaGetLastError();
}

cudaError_t LaunchDropout(cudaStream_t stream, uint64_t seed, float rate,
                          float scale, int64_t n, float* x) {
  DropoutKernel<<<Blocks(n), kThreads, 0, stream>>>(seed, rate, scale, n, x);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxXent(cudaStream_t stream, const float* logits,
                              const int32_t* labels, int64_t rows,
                              int64_t classes, float inv_rows, float* dlogits,
                              double* row_loss, int64_t* row_hit) {
  SoftmaxXentKernel<<<Blocks(rows * 32), kThreads, 0, stream>>>(
      logits, labels, rows, classes, inv_rows, dlogits, row_loss, row_hit);
  return cudaGetLastError();
}

cudaError_t LaunchSigmoidXent(cudaStream_t stream, const float* logits,
                              const float* targets, int64_t n, float inv_rows,
                              float* dlogits, double* loss) {
  SigmoidXentKernel<<<Blocks(n), kThreads, 0, stream>>>(
      logits, targets, n, inv_rows, dlogits, loss);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingBagForward(cudaStream_t stream, const float* table,
                                      int64_t dim, const int64_t* offsets,
                                      const int64_t* ids, int64_t bags,
                                      bool mean, float* out, int64_t stride) {
  EmbeddingBagForwardKernel<<<RowBlocks(bags, dim), RowThreads(dim), 0,
                              stream>>>(table, dim, offsets, ids, bags, mean,
                                        out, stride);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingBagBackward(cudaStream_t stream, const float* dout,
                                       int64_t dim, const int64_t* offsets,
                                       int64_t bags, bool mean, float* drows,
                                       int64_t stride) {
  EmbeddingBagBackwardKernel<<<RowBlocks(bags, dim), RowThreads(dim), 0,
                               stream>>>(dout, dim, offsets, bags, mean, drows,
                                         stride);
  return cudaGetLastError();
}

cudaError_t LaunchSegmentSumRows(cudaStream_t stream, const float* rows,
                                 int64_t dim, const int64_t* order,
                                 const int64_t* starts, const int64_t* counts,
                                 int64_t segments, float* out) {
  SegmentSumRowsKernel<<<RowBlocks(segments, dim), RowThreads(dim), 0,
                         stream>>>(rows, dim, order, starts, counts, segments,
                                   out);
  return cudaGetLastError();
}

}  // namespace tessera
