#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "worker/backend/cuda/cuda_nn_kernels.cuh"

namespace tessera {
namespace {

constexpr unsigned kAllLanes = 0xffffffffu;

// One warp per row, rows strided over the grid. Every lane of a warp sees
// the same r, so the warp shuffles inside the loop have all lanes present.
#define TESSERA_FOR_EACH_WARP_ROW(r, rows)                                     \
  for (int64_t r =                                                             \
           (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5; \
       r < (rows); r += (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5)

// Blocks for one warp per row.
int WarpBlocks(int64_t rows) { return Blocks(rows * 32); }

// The sum (or maximum) over the warp, in every lane.
__device__ double WarpSum(double v) {
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(kAllLanes, v, off);
  return v;
}

__device__ float WarpMax(float v) {
  for (int off = 16; off > 0; off >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(kAllLanes, v, off));
  }
  return v;
}

__global__ void FillKernel(int64_t n, float value, float* x) {
  TESSERA_FOR_EACH(i, n) { x[i] = value; }
}

// beta 0 must not read y (it may hold garbage, NaN included).
__global__ void AxpbyKernel(int64_t n, float alpha, const float* x, float beta,
                            float* y) {
  TESSERA_FOR_EACH(i, n) {
    const float ax = alpha * x[i];
    y[i] = beta == 0.0f ? ax : ax + beta * y[i];
  }
}

// Each element is read before it is written by the same thread, so out may
// alias a or b.
__global__ void MulKernel(int64_t n, const float* a, const float* b, float beta,
                          float* out) {
  TESSERA_FOR_EACH(i, n) {
    const float ab = a[i] * b[i];
    out[i] = beta == 0.0f ? ab : ab + beta * out[i];
  }
}

__global__ void UnaryForwardKernel(Backend::Unary kind, int64_t n,
                                   const float* x, float* y) {
  TESSERA_FOR_EACH(i, n) {
    const float v = x[i];
    switch (kind) {
      case Backend::Unary::kRelu:
        y[i] = v < 0.0f ? 0.0f : v;
        break;
      case Backend::Unary::kSigmoid:
        y[i] = 1.0f / (1.0f + expf(-v));
        break;
      case Backend::Unary::kTanh:
        y[i] = tanhf(v);
        break;
    }
  }
}

__global__ void UnaryBackwardKernel(Backend::Unary kind, int64_t n,
                                    const float* y, const float* dy,
                                    float* dx) {
  TESSERA_FOR_EACH(i, n) {
    const float v = y[i], g = dy[i];
    switch (kind) {
      case Backend::Unary::kRelu:
        dx[i] = v > 0.0f ? g : 0.0f;
        break;
      case Backend::Unary::kSigmoid:
        dx[i] = g * (v * (1.0f - v));
        break;
      case Backend::Unary::kTanh:
        dx[i] = g * (1.0f - v * v);
        break;
    }
  }
}

// Every read of the row's x is consumed by the reductions before any lane
// writes y, and the last pass reads x[c] before writing y[c] in the same
// lane, so y may alias x.
__global__ void SoftmaxForwardKernel(int64_t rows, int64_t cols, const float* x,
                                     float* y) {
  const int lane = threadIdx.x & 31;
  TESSERA_FOR_EACH_WARP_ROW(r, rows) {
    const float* xr = x + r * cols;
    float best = -INFINITY;
    for (int64_t c = lane; c < cols; c += 32) best = fmaxf(best, xr[c]);
    best = WarpMax(best);
    double sum = 0;
    for (int64_t c = lane; c < cols; c += 32) sum += expf(xr[c] - best);
    sum = WarpSum(sum);
    float* yr = y + r * cols;
    for (int64_t c = lane; c < cols; c += 32) {
      yr[c] = static_cast<float>(expf(xr[c] - best) / sum);
    }
  }
}

// As above, dx may alias dy.
__global__ void SoftmaxBackwardKernel(int64_t rows, int64_t cols,
                                      const float* y, const float* dy,
                                      float* dx) {
  const int lane = threadIdx.x & 31;
  TESSERA_FOR_EACH_WARP_ROW(r, rows) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    double dot = 0;
    for (int64_t c = lane; c < cols; c += 32) {
      dot += static_cast<double>(dyr[c]) * yr[c];
    }
    const float d = static_cast<float>(WarpSum(dot));
    float* dxr = dx + r * cols;
    for (int64_t c = lane; c < cols; c += 32) dxr[c] = yr[c] * (dyr[c] - d);
  }
}

__global__ void SquaredErrorKernel(int64_t n, const float* pred,
                                   const float* target, float grad_scale,
                                   float* dpred, double* loss) {
  TESSERA_FOR_EACH(i, n) {
    const float d = pred[i] - target[i];
    loss[i] = static_cast<double>(d) * d;
    if (dpred != nullptr) dpred[i] = d * grad_scale;
  }
}

__global__ void Copy2DKernel(int64_t rows, int64_t cols, const float* src,
                             int64_t src_stride, float* dst, int64_t dst_stride,
                             float beta) {
  TESSERA_FOR_EACH(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    const float v = src[r * src_stride + c];
    float* d = dst + r * dst_stride + c;
    *d = beta == 0.0f ? v : v + beta * *d;
  }
}

__global__ void GatherColumnsKernel(int64_t rows, int64_t in_cols,
                                    const float* x, int64_t n,
                                    const int32_t* index, float* y) {
  TESSERA_FOR_EACH(i, rows * n) {
    const int64_t r = i / n, j = i % n;
    y[i] = x[r * in_cols + index[j]];
  }
}

// dx must be zero first. Repeated indices add atomically, in no fixed
// order.
__global__ void ScatterColumnsKernel(int64_t rows, int64_t n, const float* dy,
                                     const int32_t* index, int64_t out_cols,
                                     float* dx) {
  TESSERA_FOR_EACH(i, rows * n) {
    const int64_t r = i / n, j = i % n;
    atomicAdd(dx + r * out_cols + index[j], dy[i]);
  }
}

__global__ void ScaleRowsKernel(int64_t rows, int64_t cols, const float* x,
                                const float* s, float beta, float* y) {
  TESSERA_FOR_EACH(i, rows * cols) {
    const float v = x[i] * s[i / cols];
    y[i] = beta == 0.0f ? v : v + beta * y[i];
  }
}

__global__ void RowDotKernel(int64_t rows, int64_t cols, const float* a,
                             const float* b, float* out) {
  const int lane = threadIdx.x & 31;
  TESSERA_FOR_EACH_WARP_ROW(r, rows) {
    double sum = 0;
    for (int64_t c = lane; c < cols; c += 32) {
      sum += static_cast<double>(a[r * cols + c]) * b[r * cols + c];
    }
    sum = WarpSum(sum);
    if (lane == 0) out[r] = static_cast<float>(sum);
  }
}

// One thread per entry of cols: [(n, oh, ow), (i, j, c)].
__global__ void Im2ColKernel(Backend::Window2D g, const float* x, float* cols) {
  const int64_t patch = g.kernel_h * g.kernel_w * g.channels;
  TESSERA_FOR_EACH(e, g.batch * g.out_h * g.out_w * patch) {
    const int64_t row = e / patch, k = e % patch;
    const int64_t c = k % g.channels, j = (k / g.channels) % g.kernel_w,
                  i = k / (g.channels * g.kernel_w);
    const int64_t ow = row % g.out_w, oh = (row / g.out_w) % g.out_h,
                  n = row / (g.out_w * g.out_h);
    const int64_t h = oh * g.stride_h + i - g.pad_top;
    const int64_t w = ow * g.stride_w + j - g.pad_left;
    cols[e] = h >= 0 && h < g.height && w >= 0 && w < g.width
                  ? x[((n * g.height + h) * g.width + w) * g.channels + c]
                  : 0.0f;
  }
}

// One thread per input element, gathering the patch entries copied from
// it: no atomics, and added in ascending (oh, ow), the order in which a
// scatter over the rows of cols would add them.
__global__ void Col2ImKernel(Backend::Window2D g, const float* cols,
                             float* dx) {
  const int64_t patch = g.kernel_h * g.kernel_w * g.channels;
  TESSERA_FOR_EACH(e, g.batch * g.height * g.width * g.channels) {
    const int64_t c = e % g.channels, w = (e / g.channels) % g.width,
                  h = (e / (g.channels * g.width)) % g.height,
                  n = e / (g.channels * g.width * g.height);
    float sum = 0.0f;
    for (int64_t i = g.kernel_h - 1; i >= 0; --i) {
      const int64_t th = h + g.pad_top - i;  // oh * stride_h
      if (th < 0 || th % g.stride_h != 0) continue;
      const int64_t oh = th / g.stride_h;
      if (oh >= g.out_h) continue;
      for (int64_t j = g.kernel_w - 1; j >= 0; --j) {
        const int64_t tw = w + g.pad_left - j;
        if (tw < 0 || tw % g.stride_w != 0) continue;
        const int64_t ow = tw / g.stride_w;
        if (ow >= g.out_w) continue;
        sum += cols[((n * g.out_h + oh) * g.out_w + ow) * patch +
                    (i * g.kernel_w + j) * g.channels + c];
      }
    }
    dx[e] = sum;
  }
}

// One thread per output (n, oh, ow, c). A window with no input element in
// it (all padding) gives 0, as the CPU backend does, and argmax -1, which
// the backward skips.
__global__ void MaxPoolForwardKernel(Backend::Window2D g, const float* x,
                                     float* y, int64_t* argmax) {
  TESSERA_FOR_EACH(o, g.batch * g.out_h * g.out_w * g.channels) {
    const int64_t c = o % g.channels, ow = (o / g.channels) % g.out_w,
                  oh = (o / (g.channels * g.out_w)) % g.out_h,
                  n = o / (g.channels * g.out_w * g.out_h);
    float best = -INFINITY;
    int64_t arg = -1;
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      const int64_t h = oh * g.stride_h + i - g.pad_top;
      if (h < 0 || h >= g.height) continue;
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const int64_t w = ow * g.stride_w + j - g.pad_left;
        if (w < 0 || w >= g.width) continue;
        const int64_t at = ((n * g.height + h) * g.width + w) * g.channels + c;
        if (arg < 0 || x[at] > best) {
          best = x[at];
          arg = at;
        }
      }
    }
    y[o] = arg < 0 ? 0.0f : best;
    argmax[o] = arg;
  }
}

// One thread per input element, gathering dy of the outputs whose windows
// cover it and whose argmax it is, in ascending output order (the order a
// scatter over the outputs would add them in).
__global__ void MaxPoolBackwardKernel(Backend::Window2D g, const float* dy,
                                      const int64_t* argmax, float* dx) {
  TESSERA_FOR_EACH(e, g.batch * g.height * g.width * g.channels) {
    const int64_t c = e % g.channels, w = (e / g.channels) % g.width,
                  h = (e / (g.channels * g.width)) % g.height,
                  n = e / (g.channels * g.width * g.height);
    // Windows covering h: oh * stride_h - pad_top <= h < that + kernel_h.
    const int64_t th = h + g.pad_top, tw = w + g.pad_left;
    const int64_t oh_lo =
        th - g.kernel_h + 1 <= 0
            ? 0
            : (th - g.kernel_h + 1 + g.stride_h - 1) / g.stride_h;
    const int64_t ow_lo =
        tw - g.kernel_w + 1 <= 0
            ? 0
            : (tw - g.kernel_w + 1 + g.stride_w - 1) / g.stride_w;
    const int64_t oh_hi = min(g.out_h - 1, th / g.stride_h);
    const int64_t ow_hi = min(g.out_w - 1, tw / g.stride_w);
    float sum = 0.0f;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const int64_t o = ((n * g.out_h + oh) * g.out_w + ow) * g.channels + c;
        if (argmax[o] == e) sum += dy[o];
      }
    }
    dx[e] = sum;
  }
}

// One thread per column; adjacent threads read adjacent columns of a row.
// No rows give zeros (the CPU's), not 0 / 0.
__global__ void ColumnMomentsKernel(int64_t rows, int64_t cols, const float* x,
                                    float* mean, float* var) {
  const double n = static_cast<double>(rows > 0 ? rows : 1);
  TESSERA_FOR_EACH(c, cols) {
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += x[r * cols + c];
    const double m = sum / n;
    double sq = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double d = x[r * cols + c] - m;
      sq += d * d;
    }
    mean[c] = static_cast<float>(m);
    var[c] = static_cast<float>(sq / n);
  }
}

__global__ void BatchNormForwardKernel(int64_t rows, int64_t cols,
                                       const float* x, const float* mean,
                                       const float* var, const float* gamma,
                                       const float* beta, float epsilon,
                                       float* y) {
  TESSERA_FOR_EACH(i, rows * cols) {
    const int64_t c = i % cols;
    y[i] = (x[i] - mean[c]) / sqrtf(var[c] + epsilon) * gamma[c] + beta[c];
  }
}

// One thread per column. With xhat = (x - mean) * rstd and N = rows, the
// moments' own gradients fold into dx = gamma * rstd * (dy - mean(dy) -
// xhat * mean(dy * xhat)).
__global__ void BatchNormBackwardKernel(int64_t rows, int64_t cols,
                                        const float* x, const float* mean,
                                        const float* var, const float* gamma,
                                        float epsilon, const float* dy,
                                        float* dx, float* dgamma,
                                        float* dbeta) {
  TESSERA_FOR_EACH(c, cols) {
    const double m = mean[c];
    const double rstd = 1.0 / sqrt(static_cast<double>(var[c]) + epsilon);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double g = dy[r * cols + c];
      sum_dy += g;
      sum_dy_xhat += g * ((x[r * cols + c] - m) * rstd);
    }
    dbeta[c] = static_cast<float>(sum_dy);
    dgamma[c] = static_cast<float>(sum_dy_xhat);
    const double n = static_cast<double>(rows);
    const double mean_dy = sum_dy / n, mean_dy_xhat = sum_dy_xhat / n;
    const double scale = gamma[c] * rstd;
    for (int64_t r = 0; r < rows; ++r) {
      const double xhat = (x[r * cols + c] - m) * rstd;
      dx[r * cols + c] = static_cast<float>(
          scale * (dy[r * cols + c] - mean_dy - xhat * mean_dy_xhat));
    }
  }
}

__global__ void LayerNormForwardKernel(int64_t rows, int64_t cols,
                                       const float* x, const float* gamma,
                                       const float* beta, float epsilon,
                                       float* y, float* mean, float* rstd) {
  const int lane = threadIdx.x & 31;
  TESSERA_FOR_EACH_WARP_ROW(r, rows) {
    const float* xr = x + r * cols;
    double sum = 0;
    for (int64_t c = lane; c < cols; c += 32) sum += xr[c];
    const double m = WarpSum(sum) / static_cast<double>(cols);
    double sq = 0;
    for (int64_t c = lane; c < cols; c += 32) {
      const double d = xr[c] - m;
      sq += d * d;
    }
    const double var = WarpSum(sq) / static_cast<double>(cols);
    const double s = 1.0 / sqrt(var + epsilon);
    float* yr = y + r * cols;
    for (int64_t c = lane; c < cols; c += 32) {
      yr[c] = static_cast<float>((xr[c] - m) * s * gamma[c] + beta[c]);
    }
    if (lane == 0) {
      mean[r] = static_cast<float>(m);
      rstd[r] = static_cast<float>(s);
    }
  }
}

// One warp per row: with g = dy * gamma and xhat = (x - mean) * rstd,
// dx = rstd * (g - mean over c of g - xhat * mean over c of g * xhat).
__global__ void LayerNormBackwardDxKernel(int64_t rows, int64_t cols,
                                          const float* x, const float* mean,
                                          const float* rstd, const float* gamma,
                                          const float* dy, float* dx) {
  const int lane = threadIdx.x & 31;
  TESSERA_FOR_EACH_WARP_ROW(r, rows) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const double m = mean[r], s = rstd[r];
    double sum_g = 0, sum_g_xhat = 0;
    for (int64_t c = lane; c < cols; c += 32) {
      const double g = static_cast<double>(dyr[c]) * gamma[c];
      sum_g += g;
      sum_g_xhat += g * ((xr[c] - m) * s);
    }
    const double n = static_cast<double>(cols);
    const double mean_g = WarpSum(sum_g) / n;
    const double mean_g_xhat = WarpSum(sum_g_xhat) / n;
    float* dxr = dx + r * cols;
    for (int64_t c = lane; c < cols; c += 32) {
      const double g = static_cast<double>(dyr[c]) * gamma[c];
      const double xhat = (xr[c] - m) * s;
      dxr[c] = static_cast<float>(s * (g - mean_g - xhat * mean_g_xhat));
    }
  }
}

// One thread per column: dgamma = sum over rows of dy * xhat, dbeta = that
// of dy.
__global__ void LayerNormBackwardParamsKernel(int64_t rows, int64_t cols,
                                              const float* x, const float* mean,
                                              const float* rstd,
                                              const float* dy, float* dgamma,
                                              float* dbeta) {
  TESSERA_FOR_EACH(c, cols) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double g = dy[r * cols + c];
      sum_dy += g;
      sum_dy_xhat +=
          g * ((x[r * cols + c] - static_cast<double>(mean[r])) * rstd[r]);
    }
    dgamma[c] = static_cast<float>(sum_dy_xhat);
    dbeta[c] = static_cast<float>(sum_dy);
  }
}

// One thread per (b, k); adjacent threads read adjacent k.
__global__ void FmOrder2ForwardKernel(int64_t batch, int64_t fields,
                                      int64_t dim, const float* x, float* y) {
  TESSERA_FOR_EACH(i, batch * dim) {
    const int64_t b = i / dim, k = i % dim;
    const float* xb = x + b * fields * dim + k;
    double sum = 0, sq = 0;
    for (int64_t f = 0; f < fields; ++f) {
      const double v = xb[f * dim];
      sum += v;
      sq += v * v;
    }
    y[i] = static_cast<float>(0.5 * (sum * sum - sq));
  }
}

__global__ void FmOrder2BackwardKernel(int64_t batch, int64_t fields,
                                       int64_t dim, const float* x,
                                       const float* dy, float* dx) {
  TESSERA_FOR_EACH(i, batch * dim) {
    const int64_t b = i / dim, k = i % dim;
    const float* xb = x + b * fields * dim + k;
    double sum = 0;
    for (int64_t f = 0; f < fields; ++f) sum += xb[f * dim];
    const double g = dy[i];
    float* dxb = dx + b * fields * dim + k;
    for (int64_t f = 0; f < fields; ++f) {
      dxb[f * dim] = static_cast<float>(g * (sum - xb[f * dim]));
    }
  }
}

}  // namespace

cudaError_t LaunchFill(cudaStream_t stream, int64_t n, float value, float* x) {
  FillKernel<<<Blocks(n), kThreads, 0, stream>>>(n, value, x);
  return cudaGetLastError();
}

cudaError_t LaunchAxpby(cudaStream_t stream, int64_t n, float alpha,
                        const float* x, float beta, float* y) {
  AxpbyKernel<<<Blocks(n), kThreads, 0, stream>>>(n, alpha, x, beta, y);
  return cudaGetLastError();
}

cudaError_t LaunchMul(cudaStream_t stream, int64_t n, const float* a,
                      const float* b, float beta, float* out) {
  MulKernel<<<Blocks(n), kThreads, 0, stream>>>(n, a, b, beta, out);
  return cudaGetLastError();
}

cudaError_t LaunchUnaryForward(cudaStream_t stream, Backend::Unary kind,
                               int64_t n, const float* x, float* y) {
  UnaryForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(kind, n, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchUnaryBackward(cudaStream_t stream, Backend::Unary kind,
                                int64_t n, const float* y, const float* dy,
                                float* dx) {
  UnaryBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(kind, n, y, dy, dx);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxForward(cudaStream_t stream, int64_t rows,
                                 int64_t cols, const float* x, float* y) {
  SoftmaxForwardKernel<<<WarpBlocks(rows), kThreads, 0, stream>>>(rows, cols, x,
                                                                  y);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxBackward(cudaStream_t stream, int64_t rows,
                                  int64_t cols, const float* y, const float* dy,
                                  float* dx) {
  SoftmaxBackwardKernel<<<WarpBlocks(rows), kThreads, 0, stream>>>(rows, cols,
                                                                   y, dy, dx);
  return cudaGetLastError();
}

cudaError_t LaunchSquaredError(cudaStream_t stream, int64_t n,
                               const float* pred, const float* target,
                               float grad_scale, float* dpred, double* loss) {
  SquaredErrorKernel<<<Blocks(n), kThreads, 0, stream>>>(
      n, pred, target, grad_scale, dpred, loss);
  return cudaGetLastError();
}

cudaError_t LaunchCopy2D(cudaStream_t stream, int64_t rows, int64_t cols,
                         const float* src, int64_t src_stride, float* dst,
                         int64_t dst_stride, float beta) {
  Copy2DKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(
      rows, cols, src, src_stride, dst, dst_stride, beta);
  return cudaGetLastError();
}

cudaError_t LaunchGatherColumns(cudaStream_t stream, int64_t rows,
                                int64_t in_cols, const float* x, int64_t n,
                                const int32_t* index, float* y) {
  GatherColumnsKernel<<<Blocks(rows * n), kThreads, 0, stream>>>(
      rows, in_cols, x, n, index, y);
  return cudaGetLastError();
}

cudaError_t LaunchScatterColumns(cudaStream_t stream, int64_t rows, int64_t n,
                                 const float* dy, const int32_t* index,
                                 int64_t out_cols, float* dx) {
  const cudaError_t err =
      cudaMemsetAsync(dx, 0, rows * out_cols * sizeof(float), stream);
  if (err != cudaSuccess || n <= 0) return err;
  ScatterColumnsKernel<<<Blocks(rows * n), kThreads, 0, stream>>>(
      rows, n, dy, index, out_cols, dx);
  return cudaGetLastError();
}

cudaError_t LaunchScaleRows(cudaStream_t stream, int64_t rows, int64_t cols,
                            const float* x, const float* s, float beta,
                            float* y) {
  ScaleRowsKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(rows, cols, x,
                                                                s, beta, y);
  return cudaGetLastError();
}

cudaError_t LaunchRowDot(cudaStream_t stream, int64_t rows, int64_t cols,
                         const float* a, const float* b, float* out) {
  RowDotKernel<<<WarpBlocks(rows), kThreads, 0, stream>>>(rows, cols, a, b,
                                                          out);
  return cudaGetLastError();
}

cudaError_t LaunchIm2Col(cudaStream_t stream, const Backend::Window2D& g,
                         const float* x, float* cols) {
  const int64_t n =
      g.batch * g.out_h * g.out_w * g.kernel_h * g.kernel_w * g.channels;
  Im2ColKernel<<<Blocks(n), kThreads, 0, stream>>>(g, x, cols);
  return cudaGetLastError();
}

cudaError_t LaunchCol2Im(cudaStream_t stream, const Backend::Window2D& g,
                         const float* cols, float* dx) {
  const int64_t n = g.batch * g.height * g.width * g.channels;
  Col2ImKernel<<<Blocks(n), kThreads, 0, stream>>>(g, cols, dx);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPoolForward(cudaStream_t stream,
                                 const Backend::Window2D& g, const float* x,
                                 float* y, int64_t* argmax) {
  const int64_t n = g.batch * g.out_h * g.out_w * g.channels;
  MaxPoolForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(g, x, y, argmax);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPoolBackward(cudaStream_t stream,
                                  const Backend::Window2D& g, const float* dy,
                                  const int64_t* argmax, float* dx) {
  const int64_t n = g.batch * g.height * g.width * g.channels;
  MaxPoolBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(g, dy, argmax, dx);
  return cudaGetLastError();
}

cudaError_t LaunchColumnMoments(cudaStream_t stream, int64_t rows, int64_t cols,
                                const float* x, float* mean, float* var) {
  ColumnMomentsKernel<<<Blocks(cols), kThreads, 0, stream>>>(rows, cols, x,
                                                             mean, var);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormForward(cudaStream_t stream, int64_t rows,
                                   int64_t cols, const float* x,
                                   const float* mean, const float* var,
                                   const float* gamma, const float* beta,
                                   float epsilon, float* y) {
  BatchNormForwardKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(
      rows, cols, x, mean, var, gamma, beta, epsilon, y);
  return cudaGetLastError();
}

cudaError_t LaunchBatchNormBackward(cudaStream_t stream, int64_t rows,
                                    int64_t cols, const float* x,
                                    const float* mean, const float* var,
                                    const float* gamma, float epsilon,
                                    const float* dy, float* dx, float* dgamma,
                                    float* dbeta) {
  BatchNormBackwardKernel<<<Blocks(cols), kThreads, 0, stream>>>(
      rows, cols, x, mean, var, gamma, epsilon, dy, dx, dgamma, dbeta);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormForward(cudaStream_t stream, int64_t rows,
                                   int64_t cols, const float* x,
                                   const float* gamma, const float* beta,
                                   float epsilon, float* y, float* mean,
                                   float* rstd) {
  LayerNormForwardKernel<<<WarpBlocks(rows), kThreads, 0, stream>>>(
      rows, cols, x, gamma, beta, epsilon, y, mean, rstd);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormBackward(cudaStream_t stream, int64_t rows,
                                    int64_t cols, const float* x,
                                    const float* mean, const float* rstd,
                                    const float* gamma, const float* dy,
                                    float* dx, float* dgamma, float* dbeta) {
  LayerNormBackwardDxKernel<<<WarpBlocks(rows), kThreads, 0, stream>>>(
      rows, cols, x, mean, rstd, gamma, dy, dx);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  LayerNormBackwardParamsKernel<<<Blocks(cols), kThreads, 0, stream>>>(
      rows, cols, x, mean, rstd, dy, dgamma, dbeta);
  return cudaGetLastError();
}

cudaError_t LaunchFmOrder2Forward(cudaStream_t stream, int64_t batch,
                                  int64_t fields, int64_t dim, const float* x,
                                  float* y) {
  FmOrder2ForwardKernel<<<Blocks(batch * dim), kThreads, 0, stream>>>(
      batch, fields, dim, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchFmOrder2Backward(cudaStream_t stream, int64_t batch,
                                   int64_t fields, int64_t dim, const float* x,
                                   const float* dy, float* dx) {
  FmOrder2BackwardKernel<<<Blocks(batch * dim), kThreads, 0, stream>>>(
      batch, fields, dim, x, dy, dx);
  return cudaGetLastError();
}

}  // namespace tessera
