// CpuBackend's ops for the layer library (worker/nn); the model ops of the
// first models are in cpu_backend.cc. Reductions accumulate in double so
// that the CPU stays the accurate reference the CUDA backend is held to.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "Eigen/Core"
#include "worker/backend/cpu/cpu_backend.h"

namespace tessera {
namespace {

using RowMajor =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Mat = Eigen::Map<RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;

}  // namespace

void CpuBackend::Fill(int64_t n, float value, float* x) {
  std::fill(x, x + n, value);
}

void CpuBackend::Axpby(int64_t n, float alpha, const float* x, float beta,
                       float* y) {
  if (beta == 0.0f) {
    for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i] + beta * y[i];
  }
}

void CpuBackend::Mul(int64_t n, const float* a, const float* b, float beta,
                     float* out) {
  if (beta == 0.0f) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i] + beta * out[i];
  }
}

void CpuBackend::UnaryForward(Unary kind, int64_t n, const float* x, float* y) {
  switch (kind) {
    case Unary::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
      break;
    case Unary::kSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
      break;
    case Unary::kTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      break;
  }
}

void CpuBackend::UnaryBackward(Unary kind, int64_t n, const float* y,
                               const float* dy, float* dx) {
  switch (kind) {
    case Unary::kRelu:
      // Both loads unconditional, so the select vectorizes (a conditional
      // load of dy keeps the loop scalar and branchy).
      for (int64_t i = 0; i < n; ++i) {
        const float g = dy[i];
        const bool on = y[i] > 0.0f;
        dx[i] = on ? g : 0.0f;
      }
      break;
    case Unary::kSigmoid:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
      break;
    case Unary::kTanh:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
      break;
  }
}

void CpuBackend::SoftmaxForward(int64_t rows, int64_t cols, const float* x,
                                float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    const float max = *std::max_element(in, in + cols);
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - max);
      sum += out[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}

void CpuBackend::SoftmaxBackward(int64_t rows, int64_t cols, const float* y,
                                 const float* dy, float* dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = y + r * cols;
    const float* g = dy + r * cols;
    float* d = dx + r * cols;
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) dot += double{g[c]} * p[c];
    for (int64_t c = 0; c < cols; ++c) {
      d[c] = p[c] * (g[c] - static_cast<float>(dot));
    }
  }
}

double CpuBackend::MeanSquaredError(const float* pred, const float* target,
                                    int64_t rows, int64_t cols, float* dpred) {
  double loss = 0;
  const float scale =
      2.0f / static_cast<float>(std::max<int64_t>(rows * cols, 1));
  for (int64_t r = 0; r < rows; ++r) {
    double row = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const float diff = pred[i] - target[i];
      row += double{diff} * diff;
      if (dpred != nullptr) dpred[i] = diff * scale;
    }
    loss += row / static_cast<double>(cols);
  }
  return loss;
}

void CpuBackend::Copy2D(int64_t rows, int64_t cols, const float* src,
                        int64_t src_stride, float* dst, int64_t dst_stride,
                        float beta) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * src_stride;
    float* d = dst + r * dst_stride;
    if (beta == 0.0f) {
      std::memcpy(d, s, cols * sizeof(float));
    } else {
      for (int64_t c = 0; c < cols; ++c) d[c] = s[c] + beta * d[c];
    }
  }
}

void CpuBackend::BatchedGemm(bool transpose_a, bool transpose_b, int64_t m,
                             int64_t n, int64_t k, float alpha, const float* a,
                             int64_t stride_a, const float* b, int64_t stride_b,
                             float beta, float* c, int64_t stride_c,
                             int64_t batch) {
  for (int64_t i = 0; i < batch; ++i) {
    Gemm(transpose_a, transpose_b, m, n, k, alpha, a + i * stride_a,
         b + i * stride_b, beta, c + i * stride_c);
  }
}

void CpuBackend::GatherColumns(int64_t rows, int64_t in_cols, const float* x,
                               int64_t n, const int32_t* index, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * in_cols;
    float* out = y + r * n;
    for (int64_t j = 0; j < n; ++j) out[j] = in[index[j]];
  }
}

void CpuBackend::ScatterColumns(int64_t rows, int64_t n, const float* dy,
                                const int32_t* index, int64_t out_cols,
                                float* dx) {
  std::fill(dx, dx + rows * out_cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = dy + r * n;
    float* d = dx + r * out_cols;
    for (int64_t j = 0; j < n; ++j) d[index[j]] += g[j];
  }
}

void CpuBackend::ScaleRows(int64_t rows, int64_t cols, const float* x,
                           const float* s, float beta, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    if (beta == 0.0f) {
      for (int64_t c = 0; c < cols; ++c) out[c] = in[c] * s[r];
    } else {
      for (int64_t c = 0; c < cols; ++c) out[c] = in[c] * s[r] + beta * out[c];
    }
  }
}

void CpuBackend::RowDot(int64_t rows, int64_t cols, const float* a,
                        const float* b, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      sum += double{a[r * cols + c]} * b[r * cols + c];
    }
    out[r] = static_cast<float>(sum);
  }
}

void CpuBackend::Im2Col(const Window2D& g, const float* x, float* cols) {
  const int64_t patch = g.kernel_h * g.kernel_w * g.channels;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        float* row = cols + ((n * g.out_h + oh) * g.out_w + ow) * patch;
        for (int64_t i = 0; i < g.kernel_h; ++i) {
          const int64_t h = oh * g.stride_h + i - g.pad_top;
          for (int64_t j = 0; j < g.kernel_w; ++j) {
            const int64_t w = ow * g.stride_w + j - g.pad_left;
            float* dst = row + (i * g.kernel_w + j) * g.channels;
            if (h < 0 || h >= g.height || w < 0 || w >= g.width) {
              std::fill(dst, dst + g.channels, 0.0f);
            } else {
              // A loop rather than memcpy: a patch row is often a single
              // channel or a few.
              const float* src =
                  x + ((n * g.height + h) * g.width + w) * g.channels;
              for (int64_t c = 0; c < g.channels; ++c) dst[c] = src[c];
            }
          }
        }
      }
    }
  }
}

void CpuBackend::Col2Im(const Window2D& g, const float* cols, float* dx) {
  std::fill(dx, dx + g.batch * g.height * g.width * g.channels, 0.0f);
  const int64_t patch = g.kernel_h * g.kernel_w * g.channels;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const float* row = cols + ((n * g.out_h + oh) * g.out_w + ow) * patch;
        for (int64_t i = 0; i < g.kernel_h; ++i) {
          const int64_t h = oh * g.stride_h + i - g.pad_top;
          if (h < 0 || h >= g.height) continue;
          for (int64_t j = 0; j < g.kernel_w; ++j) {
            const int64_t w = ow * g.stride_w + j - g.pad_left;
            if (w < 0 || w >= g.width) continue;
            const float* src = row + (i * g.kernel_w + j) * g.channels;
            float* dst = dx + ((n * g.height + h) * g.width + w) * g.channels;
            for (int64_t c = 0; c < g.channels; ++c) dst[c] += src[c];
          }
        }
      }
    }
  }
}

void CpuBackend::MaxPoolForward(const Window2D& g, const float* x, float* y,
                                int64_t* argmax) {
  // Channels innermost, so each window position is one contiguous,
  // vectorizable pass over the channels. The first of equal values wins.
  const int64_t c = g.channels;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const int64_t o = ((n * g.out_h + oh) * g.out_w + ow) * c;
        float* best = y + o;
        int64_t* at = argmax + o;
        bool first = true;
        for (int64_t i = 0; i < g.kernel_h; ++i) {
          const int64_t h = oh * g.stride_h + i - g.pad_top;
          if (h < 0 || h >= g.height) continue;
          for (int64_t j = 0; j < g.kernel_w; ++j) {
            const int64_t w = ow * g.stride_w + j - g.pad_left;
            if (w < 0 || w >= g.width) continue;
            const int64_t base = ((n * g.height + h) * g.width + w) * c;
            const float* in = x + base;
            if (first) {
              for (int64_t k = 0; k < c; ++k) {
                best[k] = in[k];
                at[k] = base + k;
              }
              first = false;
              continue;
            }
            // Branch-free (a mask, not a jump), since which value wins is
            // as random as the data.
            for (int64_t k = 0; k < c; ++k) {
              const float v = in[k], b = best[k];
              const int64_t a = at[k];
              const int64_t more = -static_cast<int64_t>(v > b);
              best[k] = std::max(b, v);  // b < v ? v : b, NaN kept as before
              at[k] = a ^ ((a ^ (base + k)) & more);
            }
          }
        }
        if (first) {  // a window entirely in the padding
          for (int64_t k = 0; k < c; ++k) {
            best[k] = 0.0f;
            at[k] = -1;
          }
        }
      }
    }
  }
}

void CpuBackend::MaxPoolBackward(const Window2D& g, const float* dy,
                                 const int64_t* argmax, float* dx) {
  std::fill(dx, dx + g.batch * g.height * g.width * g.channels, 0.0f);
  const int64_t outputs = g.batch * g.out_h * g.out_w * g.channels;
  for (int64_t o = 0; o < outputs; ++o) {
    if (argmax[o] >= 0) dx[argmax[o]] += dy[o];
  }
}

void CpuBackend::ColumnMoments(int64_t rows, int64_t cols, const float* x,
                               float* mean, float* var) {
  for (int64_t c = 0; c < cols; ++c) {
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += x[r * cols + c];
    const double m = sum / static_cast<double>(std::max<int64_t>(rows, 1));
    double sq = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double d = x[r * cols + c] - m;
      sq += d * d;
    }
    mean[c] = static_cast<float>(m);
    var[c] = static_cast<float>(
        sq / static_cast<double>(std::max<int64_t>(rows, 1)));
  }
}

void CpuBackend::BatchNormForward(int64_t rows, int64_t cols, const float* x,
                                  const float* mean, const float* var,
                                  const float* gamma, const float* beta,
                                  float epsilon, float* y) {
  for (int64_t c = 0; c < cols; ++c) {
    const float scale = gamma[c] / std::sqrt(var[c] + epsilon);
    for (int64_t r = 0; r < rows; ++r) {
      y[r * cols + c] = (x[r * cols + c] - mean[c]) * scale + beta[c];
    }
  }
}

void CpuBackend::BatchNormBackward(int64_t rows, int64_t cols, const float* x,
                                   const float* mean, const float* var,
                                   const float* gamma, float epsilon,
                                   const float* dy, float* dx, float* dgamma,
                                   float* dbeta) {
  const double n = static_cast<double>(std::max<int64_t>(rows, 1));
  for (int64_t c = 0; c < cols; ++c) {
    const double rstd = 1.0 / std::sqrt(double{var[c]} + epsilon);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double xhat = (x[r * cols + c] - mean[c]) * rstd;
      sum_dy += dy[r * cols + c];
      sum_dy_xhat += dy[r * cols + c] * xhat;
    }
    dbeta[c] = static_cast<float>(sum_dy);
    dgamma[c] = static_cast<float>(sum_dy_xhat);
    for (int64_t r = 0; r < rows; ++r) {
      const double xhat = (x[r * cols + c] - mean[c]) * rstd;
      dx[r * cols + c] = static_cast<float>(
          gamma[c] * rstd *
          (dy[r * cols + c] - sum_dy / n - xhat * sum_dy_xhat / n));
    }
  }
}

void CpuBackend::LayerNormForward(int64_t rows, int64_t cols, const float* x,
                                  const float* gamma, const float* beta,
                                  float epsilon, float* y, float* mean,
                                  float* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += in[c];
    const double m = sum / static_cast<double>(cols);
    double sq = 0;
    for (int64_t c = 0; c < cols; ++c) sq += (in[c] - m) * (in[c] - m);
    const double s = 1.0 / std::sqrt(sq / static_cast<double>(cols) + epsilon);
    mean[r] = static_cast<float>(m);
    rstd[r] = static_cast<float>(s);
    for (int64_t c = 0; c < cols; ++c) {
      y[r * cols + c] =
          static_cast<float>((in[c] - m) * s) * gamma[c] + beta[c];
    }
  }
}

void CpuBackend::LayerNormBackward(int64_t rows, int64_t cols, const float* x,
                                   const float* mean, const float* rstd,
                                   const float* gamma, const float* dy,
                                   float* dx, float* dgamma, float* dbeta) {
  std::vector<double> dg(cols, 0.0), db(cols, 0.0);
  const double n = static_cast<double>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    const float* g = dy + r * cols;
    double sum_g = 0, sum_g_xhat = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (in[c] - mean[r]) * double{rstd[r]};
      const double gg = double{g[c]} * gamma[c];
      sum_g += gg;
      sum_g_xhat += gg * xhat;
      dg[c] += g[c] * xhat;
      db[c] += g[c];
    }
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (in[c] - mean[r]) * double{rstd[r]};
      const double gg = double{g[c]} * gamma[c];
      dx[r * cols + c] = static_cast<float>(
          rstd[r] * (gg - sum_g / n - xhat * sum_g_xhat / n));
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    dgamma[c] = static_cast<float>(dg[c]);
    dbeta[c] = static_cast<float>(db[c]);
  }
}

void CpuBackend::FmOrder2Forward(int64_t batch, int64_t fields, int64_t dim,
                                 const float* x, float* y) {
  for (int64_t b = 0; b < batch; ++b) {
    const float* in = x + b * fields * dim;
    for (int64_t k = 0; k < dim; ++k) {
      double sum = 0, sq = 0;
      for (int64_t f = 0; f < fields; ++f) {
        const double v = in[f * dim + k];
        sum += v;
        sq += v * v;
      }
      y[b * dim + k] = static_cast<float>(0.5 * (sum * sum - sq));
    }
  }
}

void CpuBackend::FmOrder2Backward(int64_t batch, int64_t fields, int64_t dim,
                                  const float* x, const float* dy, float* dx) {
  for (int64_t b = 0; b < batch; ++b) {
    const float* in = x + b * fields * dim;
    float* d = dx + b * fields * dim;
    for (int64_t k = 0; k < dim; ++k) {
      double sum = 0;
      for (int64_t f = 0; f < fields; ++f) sum += in[f * dim + k];
      for (int64_t f = 0; f < fields; ++f) {
        d[f * dim + k] =
            static_cast<float>(dy[b * dim + k] * (sum - in[f * dim + k]));
      }
    }
  }
}

}  // namespace tessera
