#include "worker/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "Eigen/Core"
#include "common/counter_rng.h"
#include "worker/backend/cpu/cpu_dropout_avx2.h"
#include "worker/backend/cpu/cpu_gemm_avx2.h"

namespace tessera {
namespace {

using RowMajor =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Mat = Eigen::Map<RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;

}  // namespace

namespace cpu_internal {

// Here, in the baseline build: code compiled for AVX2 must not run before
// the CPU is known to have it.
bool UseDropoutAvx2() {
#if defined(TESSERA_DROPOUT_AVX2)
  static const bool use = __builtin_cpu_supports("avx2");
  return use;
#else
  return false;
#endif
}

bool UseGemmAvx2() {
#if defined(TESSERA_GEMM_AVX2)
  static const bool use =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return use;
#else
  return false;
#endif
}

}  // namespace cpu_internal

void* CpuBackend::AllocateBytes(int64_t bytes) {
  // 64-byte alignment suits Eigen's vector loads.
  const size_t rounded = ((std::max<int64_t>(bytes, 1) + 63) / 64) * 64;
  return std::aligned_alloc(64, rounded);
}

void CpuBackend::FreeBytes(void* ptr) { std::free(ptr); }

void CpuBackend::CopyToDevice(const void* host, void* device, int64_t bytes) {
  if (bytes > 0 && host != device) std::memcpy(device, host, bytes);
}

void CpuBackend::CopyToHost(const void* device, void* host, int64_t bytes) {
  if (bytes > 0 && host != device) std::memcpy(host, device, bytes);
}

void CpuBackend::CopyOnDevice(const void* from, void* to, int64_t bytes) {
  if (bytes > 0 && from != to) std::memcpy(to, from, bytes);
}

void CpuBackend::Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                      int64_t k, float alpha, const float* a, const float* b,
                      float beta, float* c) {
  if (cpu_internal::UseGemmAvx2()) {
    cpu_internal::GemmAvx2(transpose_a, transpose_b, m, n, k, alpha, a, b, beta,
                           c);
    return;
  }
  ConstMat A(a, transpose_a ? k : m, transpose_a ? m : k);
  ConstMat B(b, transpose_b ? n : k, transpose_b ? k : n);
  Mat C(c, m, n);
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

void CpuBackend::AddBias(const float* bias, int64_t rows, int64_t cols,
                         float* x) {
  Mat X(x, rows, cols);
  X.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, cols);
}

void CpuBackend::BiasGrad(const float* dy, int64_t rows, int64_t cols,
                          float* dbias) {
  Eigen::Map<Eigen::RowVectorXf>(dbias, cols) =
      ConstMat(dy, rows, cols).colwise().sum();
}

void CpuBackend::Relu(int64_t n, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
}

void CpuBackend::ReluGrad(const float* y, int64_t n, float* dy) {
  // Both loads unconditional, so the select vectorizes.
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    const bool on = y[i] > 0.0f;
    dy[i] = on ? g : 0.0f;
  }
}

void CpuBackend::Dropout(uint64_t seed, float rate, int64_t n, float* x) {
  if (rate <= 0.0f) return;
  const float scale = 1.0f / (1.0f - rate);
  int64_t i = 0;
  if (cpu_internal::UseDropoutAvx2()) {
    i = cpu_internal::DropoutAvx2(seed, rate, scale, n, x);
  }
  for (; i < n; ++i) {
    x[i] = CounterUniform(seed, i) >= rate ? x[i] * scale : 0.0f;
  }
}

double CpuBackend::SoftmaxCrossEntropy(const float* logits,
                                       const int32_t* labels, int64_t rows,
                                       int64_t classes, float* dlogits,
                                       int64_t* correct) {
  double loss = 0;
  int64_t hits = 0;
  const float inv_rows = 1.0f / static_cast<float>(std::max<int64_t>(rows, 1));
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * classes;
    const int64_t argmax = std::max_element(z, z + classes) - z;
    const float zmax = z[argmax];
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(z[c] - zmax);
    const int32_t label = labels[r];
    // log-sum-exp form: never takes the log of an underflowed probability.
    loss += std::log(sum) - (z[label] - zmax);
    if (argmax == label) ++hits;
    if (dlogits != nullptr) {
      float* d = dlogits + r * classes;
      for (int64_t c = 0; c < classes; ++c) {
        const float p = static_cast<float>(std::exp(z[c] - zmax) / sum);
        d[c] = (p - (c == label ? 1.0f : 0.0f)) * inv_rows;
      }
    }
  }
  if (correct != nullptr) *correct = hits;
  return loss;
}

double CpuBackend::SigmoidCrossEntropy(const float* logits,
                                       const float* targets, int64_t rows,
                                       int64_t cols, float* dlogits) {
  const float inv_rows = 1.0f / static_cast<float>(std::max<int64_t>(rows, 1));
  double loss = 0;
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float z = logits[i], t = targets[i];
    // Stable for any z: never exponentiates a positive number.
    loss += std::max(z, 0.0f) - z * t + std::log1p(std::exp(-std::fabs(z)));
    if (dlogits != nullptr) {
      const float sigmoid = 1.0f / (1.0f + std::exp(-z));
      dlogits[i] = (sigmoid - t) * inv_rows;
    }
  }
  return loss;
}

void CpuBackend::EmbeddingBagForward(const float* table, int64_t dim,
                                     const int64_t* offsets, const int64_t* ids,
                                     int64_t bags, Combiner combiner,
                                     float* out, int64_t stride) {
  for (int64_t b = 0; b < bags; ++b) {
    float* o = out + b * stride;
    std::fill(o, o + dim, 0.0f);
    for (int64_t j = offsets[b]; j < offsets[b + 1]; ++j) {
      const float* row = table + ids[j] * dim;
      for (int64_t d = 0; d < dim; ++d) o[d] += row[d];
    }
    const int64_t count = offsets[b + 1] - offsets[b];
    if (combiner == Combiner::kMean && count > 0) {
      const float n = static_cast<float>(count);
      for (int64_t d = 0; d < dim; ++d) o[d] /= n;
    }
  }
}

void CpuBackend::EmbeddingBagBackward(const float* dout, int64_t dim,
                                      const int64_t* offsets, int64_t bags,
                                      Combiner combiner, float* drows,
                                      int64_t stride) {
  for (int64_t b = 0; b < bags; ++b) {
    const float* g = dout + b * stride;
    const int64_t count = offsets[b + 1] - offsets[b];
    const float n = static_cast<float>(count);
    for (int64_t j = offsets[b]; j < offsets[b + 1]; ++j) {
      float* d = drows + j * dim;
      for (int64_t c = 0; c < dim; ++c) {
        d[c] = combiner == Combiner::kMean ? g[c] / n : g[c];
      }
    }
  }
}

int64_t CpuBackend::ReduceSparseGrad(const int64_t* ids, const float* rows,
                                     int64_t n, int64_t dim,
                                     int64_t* unique_ids, float* summed_rows) {
  // A stable sort keeps each id's rows in their original order, the order
  // the CUDA backend sums them in too.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [ids](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  int64_t unique = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[order[i]];
    const float* row = rows + order[i] * dim;
    if (unique == 0 || unique_ids[unique - 1] != id) {
      unique_ids[unique] = id;
      float* sum = summed_rows + unique * dim;
      std::fill(sum, sum + dim, 0.0f);
      ++unique;
    }
    float* sum = summed_rows + (unique - 1) * dim;
    for (int64_t d = 0; d < dim; ++d) sum[d] += row[d];
  }
  return unique;
}

}  // namespace tessera
