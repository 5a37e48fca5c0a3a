#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <new>

#ifndef TESSERA_CUDA_ARCHS
#define TESSERA_CUDA_ARCHS "(unknown)"
#endif
#include <thrust/execution_policy.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/system/cuda/execution_policy.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/counter_rng.h"
#include "worker/backend/cuda/cublas_library.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/cuda_nn_kernels.cuh"

namespace tessera {
namespace {

constexpr int64_t kStagingBytes = 4 << 20;  // per pinned staging buffer

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

const char* CublasName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_(other)";
  }
}

// Thrust's temporary storage, kept between calls: a freed block goes back
// to a free list by size and is handed out again, so a reduce, sort or scan
// does not cudaMalloc and cudaFree (a device-wide synchronisation) on every
// call, as Thrust's default allocator does. Used by one stream at a time.
class ThrustScratch {
 public:
  using value_type = char;

  ThrustScratch() = default;
  ThrustScratch(const ThrustScratch&) = delete;
  ThrustScratch& operator=(const ThrustScratch&) = delete;
  ~ThrustScratch() {
    for (auto& [bytes, ptr] : free_) cudaFree(ptr);
    for (auto& [ptr, bytes] : used_) cudaFree(ptr);
  }

  char* allocate(std::ptrdiff_t bytes) {
    auto it = free_.lower_bound(bytes);
    if (it != free_.end()) {
      char* ptr = it->second;
      used_.emplace(ptr, it->first);
      free_.erase(it);
      return ptr;
    }
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, std::max<std::ptrdiff_t>(bytes, 1)) != cudaSuccess) {
      cudaGetLastError();  // reported as the exception, not to a later call
      throw std::bad_alloc();
    }
    used_.emplace(static_cast<char*>(ptr), bytes);
    return static_cast<char*>(ptr);
  }

  void deallocate(char* ptr, size_t) {
    auto it = used_.find(ptr);
    if (it == used_.end()) return;
    free_.emplace(it->second, ptr);
    used_.erase(it);
  }

 private:
  std::multimap<std::ptrdiff_t, char*> free_;
  std::map<char*, std::ptrdiff_t> used_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int ordinal, std::string name)
      : ordinal_(ordinal), name_(std::move(name)) {}

  // Creates the stream, the cuBLAS handle and the staging buffers.
  absl::Status Init() {
    Check(cudaSetDevice(ordinal_), "cudaSetDevice");
    // A GPU older than every architecture this build has code for (and
    // older than its PTX) answers every call but cannot launch a kernel:
    // refuse it here, so --device=auto falls back to the CPU and an
    // explicit --device=cuda:N stops at start-up with the reason.
    if (status_.ok()) {
      cudaFuncAttributes attributes;
      const cudaError_t image = cudaFuncGetAttributes(&attributes, ReluKernel);
      if (image != cudaSuccess) {
        cudaGetLastError();  // clear it, so no later call is blamed
        status_ = absl::UnavailableError(absl::StrCat(
            name_, " cannot run this build's kernels (",
            cudaGetErrorName(image),
            "): the build has code for CUDA "
            "architectures ",
            TESSERA_CUDA_ARCHS,
            " only; rebuild with "
            "-DCMAKE_CUDA_ARCHITECTURES=<this GPU's> or use --device=cpu"));
      }
    }
    Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
          "cudaStreamCreate");
    if (status_.ok()) {
      // cuBLAS is loaded only now, by a process that computes on a GPU
      // (cublas_library.h says why).
      absl::StatusOr<const CublasApi*> api = LoadCublas();
      if (api.ok()) {
        cublas_ = *api;
      } else {
        status_ = absl::UnavailableError(
            absl::StrCat(name_, ": ", api.status().message()));
      }
    }
    if (status_.ok()) {
      CheckBlas(cublas_->create(&blas_), "cublasCreate");
    }
    if (status_.ok()) {
      CheckBlas(cublas_->set_stream(blas_, stream_), "cublasSetStream");
      // Plain FP32: the default math mode uses no TF32 tensor-op rounding,
      // so CPU and GPU agree to FP32 accumulation order.
      CheckBlas(cublas_->set_math_mode(blas_, CUBLAS_DEFAULT_MATH),
                "cublasSetMathMode");
    }
    Check(cudaStreamCreateWithFlags(&upload_stream_, cudaStreamNonBlocking),
          "cudaStreamCreate (uploads)");
    Check(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming),
          "cudaEventCreate (uploads)");
    Check(cudaEventCreateWithFlags(&released_, cudaEventDisableTiming),
          "cudaEventCreate (uploads)");
    for (Staging* s :
         {&upload_[0], &upload_[1], &download_[0], &download_[1]}) {
      if (!status_.ok()) break;
      Check(cudaHostAlloc(&s->host, kStagingBytes, cudaHostAllocDefault),
            "cudaHostAlloc (pinned staging buffer)");
      Check(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming),
            "cudaEventCreate");
    }
    return status_;
  }

  ~CudaBackend() override {
    cudaSetDevice(ordinal_);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (upload_stream_ != nullptr) cudaStreamSynchronize(upload_stream_);
    for (Staging* s :
         {&upload_[0], &upload_[1], &download_[0], &download_[1]}) {
      if (s->host != nullptr) cudaFreeHost(s->host);
      if (s->done != nullptr) cudaEventDestroy(s->done);
    }
    for (Scratch& s : scratch_) {
      if (s.ptr != nullptr) cudaFree(s.ptr);
    }
    if (blas_ != nullptr) cublas_->destroy(blas_);
    if (uploaded_ != nullptr) cudaEventDestroy(uploaded_);
    if (released_ != nullptr) cudaEventDestroy(released_);
    if (upload_stream_ != nullptr) cudaStreamDestroy(upload_stream_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  std::string device_name() const override { return name_; }

  void* AllocateBytes(int64_t bytes) override {
    if (!Ready()) return nullptr;
    void* ptr = nullptr;
    Check(cudaMalloc(&ptr, std::max<int64_t>(bytes, 1)),
          absl::StrCat("cudaMalloc of ", bytes, " bytes").c_str());
    return ptr;
  }

  // A failed free is recorded like any failed call, so the next launch is
  // not blamed for it.
  void FreeBytes(void* ptr) override {
    if (ptr == nullptr) return;
    Check(cudaSetDevice(ordinal_), "cudaSetDevice (free)");
    Check(cudaFree(ptr), "cudaFree");
  }

  absl::Status status() const override { return status_; }

  void* native_stream() const override { return stream_; }

  // Pinned (page-locked) memory, which the DMA engines read and write
  // directly: copies from and to it skip the staging buffers, and one from
  // it returns as soon as it is queued. Where pinning fails (too much of
  // the host pinned already), plain memory: slower copies, same results.
  void* AllocateHost(int64_t bytes) override {
    void* ptr = nullptr;
    const int64_t size = std::max<int64_t>(bytes, 1);
    if (cudaHostAlloc(&ptr, size, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();  // not a device error: no later launch is blamed
      return AllocatePlainHost(bytes);
    }
    std::lock_guard<std::mutex> lock(pinned_mu_);
    pinned_.emplace(static_cast<const char*>(ptr), size);
    return ptr;
  }

  void FreeHost(void* ptr) override {
    if (ptr == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(pinned_mu_);
      auto it = pinned_.find(static_cast<const char*>(ptr));
      if (it != pinned_.end()) {
        pinned_.erase(it);
        if (cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError();
        return;
      }
    }
    FreePlainHost(ptr);
  }

  // A pinned buffer goes straight to the device on the stream; any other
  // through the pinned staging buffers, alternating, so the host memcpy of
  // one chunk overlaps the DMA of the previous one, and returns once the
  // host buffer may be reused.
  void CopyToDevice(const void* host, void* device, int64_t bytes) override {
    if (bytes <= 0 || !Ready()) return;
    if (Pinned(host, bytes)) {
      Check(
          cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync from pinned memory");
      return;
    }
    const char* src = static_cast<const char*>(host);
    char* dst = static_cast<char*>(device);
    for (int64_t done = 0; done < bytes && status_.ok();) {
      const int64_t chunk = std::min(kStagingBytes, bytes - done);
      Staging& s = upload_[next_upload_];
      next_upload_ ^= 1;
      if (!Check(cudaEventSynchronize(s.done), "waiting for an upload")) return;
      std::memcpy(s.host, src + done, chunk);
      Check(cudaMemcpyAsync(dst + done, s.host, chunk, cudaMemcpyHostToDevice,
                            stream_),
            "cudaMemcpyAsync to device");
      Check(cudaEventRecord(s.done, stream_), "cudaEventRecord");
      done += chunk;
    }
  }

  // On the prefetching thread: the copy goes on upload_stream_, which only
  // this method queues copies on, so it runs beside the ops' kernels. The
  // CUDA runtime's current device is per thread, hence the cudaSetDevice.
  // Errors stay in upload_status_ (its own lock: status_ belongs to the
  // ops' thread) until AwaitUploads reports them.
  void Upload(const void* host, void* device, int64_t bytes) override {
    if (bytes <= 0 || device_failed_.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(upload_mu_);
    if (!upload_status_.ok()) return;
    const char* what = "cudaSetDevice (upload)";
    cudaError_t err = cudaSetDevice(ordinal_);
    if (err == cudaSuccess) {
      what = Pinned(host, bytes) ? "cudaMemcpyAsync (upload from pinned memory)"
                                 : "cudaMemcpyAsync (upload)";
      err = cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice,
                            upload_stream_);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();  // reported below, not blamed on a later call
      upload_status_ = absl::InternalError(absl::StrCat(
          name_, ": ", what, " of ", bytes, " bytes failed: ",
          cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
    }
  }

  void AwaitUploads() override {
    {
      std::lock_guard<std::mutex> lock(upload_mu_);
      if (!upload_status_.ok() && status_.ok()) status_ = upload_status_;
    }
    OrderStreams(upload_stream_, stream_, uploaded_, "uploads done");
  }

  void ReleaseUploads() override {
    OrderStreams(stream_, upload_stream_, released_, "upload targets read");
  }

  void CopyToHost(const void* device, void* host, int64_t bytes) override {
    if (bytes <= 0 || !Ready()) return;
    if (Pinned(host, bytes)) {
      if (Check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost,
                                stream_),
                "cudaMemcpyAsync to pinned memory")) {
        Check(cudaStreamSynchronize(stream_), "waiting for a download");
      }
      return;
    }
    const char* src = static_cast<const char*>(device);
    char* dst = static_cast<char*>(host);
    Staging* pending = nullptr;
    int64_t pending_offset = 0, pending_bytes = 0;
    auto drain = [&]() {
      if (pending == nullptr) return;
      if (Check(cudaEventSynchronize(pending->done),
                "waiting for a download")) {
        std::memcpy(dst + pending_offset, pending->host, pending_bytes);
      }
      pending = nullptr;
    };
    for (int64_t done = 0, i = 0; done < bytes && status_.ok(); ++i) {
      const int64_t chunk = std::min(kStagingBytes, bytes - done);
      Staging& s = download_[i & 1];
      Check(cudaMemcpyAsync(s.host, src + done, chunk, cudaMemcpyDeviceToHost,
                            stream_),
            "cudaMemcpyAsync to host");
      Check(cudaEventRecord(s.done, stream_), "cudaEventRecord");
      drain();
      pending = &s;
      pending_offset = done;
      pending_bytes = chunk;
      done += chunk;
    }
    drain();
  }

  void CopyOnDevice(const void* from, void* to, int64_t bytes) override {
    if (bytes <= 0 || !Ready()) return;
    Check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync on device");
  }

  absl::Status Synchronize() override {
    if (Ready()) Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return status_;
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
            float alpha, const float* a, const float* b, float beta,
            float* c) override {
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

  void AddBias(const float* bias, int64_t rows, int64_t cols,
               float* x) override {
    if (rows * cols <= 0 || !Ready()) return;
    AddBiasKernel<<<Blocks(rows * cols), kThreads, 0, stream_>>>(bias, rows,
                                                                 cols, x);
    CheckLaunch("AddBias");
  }

  // dbias = dy^T * ones, a cuBLAS matrix-vector product.
  void BiasGrad(const float* dy, int64_t rows, int64_t cols,
                float* dbias) override {
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

  void Relu(int64_t n, float* x) override {
    if (n <= 0 || !Ready()) return;
    ReluKernel<<<Blocks(n), kThreads, 0, stream_>>>(n, x);
    CheckLaunch("Relu");
  }

  void ReluGrad(const float* y, int64_t n, float* dy) override {
    if (n <= 0 || !Ready()) return;
    ReluGradKernel<<<Blocks(n), kThreads, 0, stream_>>>(y, n, dy);
    CheckLaunch("ReluGrad");
  }

  void Dropout(uint64_t seed, float rate, int64_t n, float* x) override {
    if (rate <= 0.0f || n <= 0 || !Ready()) return;
    const float scale = 1.0f / (1.0f - rate);  // as the CPU computes it
    DropoutKernel<<<Blocks(n), kThreads, 0, stream_>>>(seed, rate, scale, n, x);
    CheckLaunch("Dropout");
  }

  double SoftmaxCrossEntropy(const float* logits, const int32_t* labels,
                             int64_t rows, int64_t classes, float* dlogits,
                             int64_t* correct) override {
    if (correct != nullptr) *correct = 0;
    if (rows <= 0 || !Ready()) return 0;
    double* loss = static_cast<double*>(ScratchBytes(kLoss, rows * 8));
    int64_t* hit = static_cast<int64_t*>(ScratchBytes(kHits, rows * 8));
    if (loss == nullptr || hit == nullptr) return 0;
    const float inv_rows = 1.0f / static_cast<float>(rows);
    SoftmaxXentKernel<<<Blocks(rows * 32), kThreads, 0, stream_>>>(
        logits, labels, rows, classes, inv_rows, dlogits, loss, hit);
    if (!CheckLaunch("SoftmaxCrossEntropy")) return 0;
    double sum = 0;
    int64_t hits = 0;
    RunThrust("SoftmaxCrossEntropy reduction", [&] {
      sum = thrust::reduce(thrust::cuda::par(thrust_scratch_).on(stream_), loss,
                           loss + rows, 0.0);
      hits = thrust::reduce(thrust::cuda::par(thrust_scratch_).on(stream_), hit,
                            hit + rows, int64_t{0});
    });
    if (correct != nullptr) *correct = hits;
    return sum;
  }

  double SigmoidCrossEntropy(const float* logits, const float* targets,
                             int64_t rows, int64_t cols,
                             float* dlogits) override {
    const int64_t n = rows * cols;
    if (n <= 0 || !Ready()) return 0;
    double* loss = static_cast<double*>(ScratchBytes(kLoss, n * 8));
    if (loss == nullptr) return 0;
    const float inv_rows = 1.0f / static_cast<float>(rows);
    SigmoidXentKernel<<<Blocks(n), kThreads, 0, stream_>>>(
        logits, targets, n, inv_rows, dlogits, loss);
    if (!CheckLaunch("SigmoidCrossEntropy")) return 0;
    double sum = 0;
    RunThrust("SigmoidCrossEntropy reduction", [&] {
      sum = thrust::reduce(thrust::cuda::par(thrust_scratch_).on(stream_), loss,
                           loss + n, 0.0);
    });
    return sum;
  }

  void EmbeddingBagForward(const float* table, int64_t dim,
                           const int64_t* offsets, const int64_t* ids,
                           int64_t bags, Combiner combiner, float* out,
                           int64_t stride) override {
    if (bags <= 0 || dim <= 0 || !Ready()) return;
    EmbeddingBagForwardKernel<<<RowBlocks(bags, dim), RowThreads(dim), 0,
                                stream_>>>(table, dim, offsets, ids, bags,
                                           combiner == Combiner::kMean, out,
                                           stride);
    CheckLaunch("EmbeddingBagForward");
  }

  void EmbeddingBagBackward(const float* dout, int64_t dim,
                            const int64_t* offsets, int64_t bags,
                            Combiner combiner, float* drows,
                            int64_t stride) override {
    if (bags <= 0 || dim <= 0 || !Ready()) return;
    EmbeddingBagBackwardKernel<<<RowBlocks(bags, dim), RowThreads(dim), 0,
                                 stream_>>>(
        dout, dim, offsets, bags, combiner == Combiner::kMean, drows, stride);
    CheckLaunch("EmbeddingBagBackward");
  }

  // Thrust: stable sort of (id, position), run lengths of equal ids by
  // reduce_by_key, their starts by exclusive_scan; then a kernel sums each
  // run's rows.
  int64_t ReduceSparseGrad(const int64_t* ids, const float* rows, int64_t n,
                           int64_t dim, int64_t* unique_ids,
                           float* summed_rows) override {
    if (n <= 0 || !Ready()) return 0;
    int64_t* keys = static_cast<int64_t*>(ScratchBytes(kKeys, n * 8));
    int64_t* order = static_cast<int64_t*>(ScratchBytes(kOrder, n * 8));
    int64_t* counts = static_cast<int64_t*>(ScratchBytes(kCounts, n * 8));
    int64_t* starts = static_cast<int64_t*>(ScratchBytes(kStarts, n * 8));
    if (keys == nullptr || order == nullptr || counts == nullptr ||
        starts == nullptr) {
      return 0;
    }
    if (!Check(cudaMemcpyAsync(keys, ids, n * 8, cudaMemcpyDeviceToDevice,
                               stream_),
               "cudaMemcpyAsync of ids")) {
      return 0;
    }
    int64_t unique = 0;
    RunThrust("ReduceSparseGrad", [&] {
      auto policy = thrust::cuda::par(thrust_scratch_).on(stream_);
      thrust::sequence(policy, order, order + n);
      thrust::stable_sort_by_key(policy, keys, keys + n, order);
      auto ends = thrust::reduce_by_key(
          policy, keys, keys + n, thrust::make_constant_iterator<int64_t>(1),
          unique_ids, counts);
      unique = ends.first - unique_ids;
      thrust::exclusive_scan(policy, counts, counts + unique, starts);
    });
    // Nothing is launched after an error: the segments may be unwritten.
    if (!status_.ok()) return 0;
    if (unique <= 0 || dim <= 0) return unique;
    SegmentSumRowsKernel<<<RowBlocks(unique, dim), RowThreads(dim), 0,
                           stream_>>>(rows, dim, order, starts, counts, unique,
                                      summed_rows);
    CheckLaunch("ReduceSparseGrad segment sum");
    return status_.ok() ? unique : 0;
  }

  // ---- The layer library's ops: kernels in cuda_nn_kernels.cu, cuBLAS for
  // BatchedGemm, Thrust for MeanSquaredError's sum.

  void Fill(int64_t n, float value, float* x) override {
    if (n <= 0 || !Ready()) return;
    CheckLaunch("Fill", LaunchFill(stream_, n, value, x));
  }

  void Axpby(int64_t n, float alpha, const float* x, float beta,
             float* y) override {
    if (n <= 0 || !Ready()) return;
    CheckLaunch("Axpby", LaunchAxpby(stream_, n, alpha, x, beta, y));
  }

  void Mul(int64_t n, const float* a, const float* b, float beta,
           float* out) override {
    if (n <= 0 || !Ready()) return;
    CheckLaunch("Mul", LaunchMul(stream_, n, a, b, beta, out));
  }

  void UnaryForward(Unary kind, int64_t n, const float* x, float* y) override {
    if (n <= 0 || !Ready()) return;
    CheckLaunch("UnaryForward", LaunchUnaryForward(stream_, kind, n, x, y));
  }

  void UnaryBackward(Unary kind, int64_t n, const float* y, const float* dy,
                     float* dx) override {
    if (n <= 0 || !Ready()) return;
    CheckLaunch("UnaryBackward",
                LaunchUnaryBackward(stream_, kind, n, y, dy, dx));
  }

  void SoftmaxForward(int64_t rows, int64_t cols, const float* x,
                      float* y) override {
    if (rows <= 0 || cols <= 0 || !Ready()) return;
    CheckLaunch("SoftmaxForward",
                LaunchSoftmaxForward(stream_, rows, cols, x, y));
  }

  void SoftmaxBackward(int64_t rows, int64_t cols, const float* y,
                       const float* dy, float* dx) override {
    if (rows <= 0 || cols <= 0 || !Ready()) return;
    CheckLaunch("SoftmaxBackward",
                LaunchSoftmaxBackward(stream_, rows, cols, y, dy, dx));
  }

  // The sum over rows of each row's mean is the sum of every squared error
  // divided by cols. thrust::reduce returns to the host, so this waits for
  // the stream as an op returning a value must.
  double MeanSquaredError(const float* pred, const float* target, int64_t rows,
                          int64_t cols, float* dpred) override {
    const int64_t n = rows * cols;
    if (n <= 0 || !Ready()) return 0;
    double* loss = static_cast<double*>(ScratchBytes(kLoss, n * 8));
    if (loss == nullptr) return 0;
    const float grad_scale = 2.0f / static_cast<float>(n);
    if (!CheckLaunch("MeanSquaredError",
                     LaunchSquaredError(stream_, n, pred, target, grad_scale,
                                        dpred, loss))) {
      return 0;
    }
    double sum = 0;
    RunThrust("MeanSquaredError reduction", [&] {
      sum = thrust::reduce(thrust::cuda::par(thrust_scratch_).on(stream_), loss,
                           loss + n, 0.0);
    });
    return status_.ok() ? sum / static_cast<double>(cols) : 0;
  }

  void Copy2D(int64_t rows, int64_t cols, const float* src, int64_t src_stride,
              float* dst, int64_t dst_stride, float beta) override {
    if (rows <= 0 || cols <= 0 || !Ready()) return;
    CheckLaunch("Copy2D", LaunchCopy2D(stream_, rows, cols, src, src_stride,
                                       dst, dst_stride, beta));
  }

  // Mapped to column-major as Gemm is; the strides carry over unchanged.
  void BatchedGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                   int64_t k, float alpha, const float* a, int64_t stride_a,
                   const float* b, int64_t stride_b, float beta, float* c,
                   int64_t stride_c, int64_t batch) override {
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

  void GatherColumns(int64_t rows, int64_t in_cols, const float* x, int64_t n,
                     const int32_t* index, float* y) override {
    if (rows <= 0 || n <= 0 || !Ready()) return;
    CheckLaunch("GatherColumns",
                LaunchGatherColumns(stream_, rows, in_cols, x, n, index, y));
  }

  void ScatterColumns(int64_t rows, int64_t n, const float* dy,
                      const int32_t* index, int64_t out_cols,
                      float* dx) override {
    if (rows <= 0 || out_cols <= 0 || !Ready()) return;
    CheckLaunch("ScatterColumns", LaunchScatterColumns(stream_, rows, n, dy,
                                                       index, out_cols, dx));
  }

  void ScaleRows(int64_t rows, int64_t cols, const float* x, const float* s,
                 float beta, float* y) override {
    if (rows <= 0 || cols <= 0 || !Ready()) return;
    CheckLaunch("ScaleRows",
                LaunchScaleRows(stream_, rows, cols, x, s, beta, y));
  }

  void RowDot(int64_t rows, int64_t cols, const float* a, const float* b,
              float* out) override {
    if (rows <= 0 || !Ready()) return;
    CheckLaunch("RowDot", LaunchRowDot(stream_, rows, cols, a, b, out));
  }

  void Im2Col(const Window2D& g, const float* x, float* cols) override {
    if (g.batch * g.out_h * g.out_w * g.kernel_h * g.kernel_w * g.channels <=
            0 ||
        !Ready()) {
      return;
    }
    CheckLaunch("Im2Col", LaunchIm2Col(stream_, g, x, cols));
  }

  void Col2Im(const Window2D& g, const float* cols, float* dx) override {
    if (g.batch * g.height * g.width * g.channels <= 0 || !Ready()) return;
    CheckLaunch("Col2Im", LaunchCol2Im(stream_, g, cols, dx));
  }

  void MaxPoolForward(const Window2D& g, const float* x, float* y,
                      int64_t* argmax) override {
    if (g.batch * g.out_h * g.out_w * g.channels <= 0 || !Ready()) return;
    CheckLaunch("MaxPoolForward",
                LaunchMaxPoolForward(stream_, g, x, y, argmax));
  }

  void MaxPoolBackward(const Window2D& g, const float* dy,
                       const int64_t* argmax, float* dx) override {
    if (g.batch * g.height * g.width * g.channels <= 0 || !Ready()) return;
    CheckLaunch("MaxPoolBackward",
                LaunchMaxPoolBackward(stream_, g, dy, argmax, dx));
  }

  void ColumnMoments(int64_t rows, int64_t cols, const float* x, float* mean,
                     float* var) override {
    if (cols <= 0 || !Ready()) return;
    CheckLaunch("ColumnMoments",
                LaunchColumnMoments(stream_, rows, cols, x, mean, var));
  }

  void BatchNormForward(int64_t rows, int64_t cols, const float* x,
                        const float* mean, const float* var, const float* gamma,
                        const float* beta, float epsilon, float* y) override {
    if (rows <= 0 || cols <= 0 || !Ready()) return;
    CheckLaunch("BatchNormForward",
                LaunchBatchNormForward(stream_, rows, cols, x, mean, var, gamma,
                                       beta, epsilon, y));
  }

  void BatchNormBackward(int64_t rows, int64_t cols, const float* x,
                         const float* mean, const float* var,
                         const float* gamma, float epsilon, const float* dy,
                         float* dx, float* dgamma, float* dbeta) override {
    if (cols <= 0 || !Ready()) return;
    CheckLaunch("BatchNormBackward",
                LaunchBatchNormBackward(stream_, rows, cols, x, mean, var,
                                        gamma, epsilon, dy, dx, dgamma, dbeta));
  }

  void LayerNormForward(int64_t rows, int64_t cols, const float* x,
                        const float* gamma, const float* beta, float epsilon,
                        float* y, float* mean, float* rstd) override {
    if (rows <= 0 || cols <= 0 || !Ready()) return;
    CheckLaunch("LayerNormForward",
                LaunchLayerNormForward(stream_, rows, cols, x, gamma, beta,
                                       epsilon, y, mean, rstd));
  }

  void LayerNormBackward(int64_t rows, int64_t cols, const float* x,
                         const float* mean, const float* rstd,
                         const float* gamma, const float* dy, float* dx,
                         float* dgamma, float* dbeta) override {
    if (cols <= 0 || !Ready()) return;
    CheckLaunch("LayerNormBackward",
                LaunchLayerNormBackward(stream_, rows, cols, x, mean, rstd,
                                        gamma, dy, dx, dgamma, dbeta));
  }

  void FmOrder2Forward(int64_t batch, int64_t fields, int64_t dim,
                       const float* x, float* y) override {
    if (batch <= 0 || dim <= 0 || !Ready()) return;
    CheckLaunch("FmOrder2Forward",
                LaunchFmOrder2Forward(stream_, batch, fields, dim, x, y));
  }

  void FmOrder2Backward(int64_t batch, int64_t fields, int64_t dim,
                        const float* x, const float* dy, float* dx) override {
    if (batch <= 0 || fields <= 0 || dim <= 0 || !Ready()) return;
    CheckLaunch("FmOrder2Backward",
                LaunchFmOrder2Backward(stream_, batch, fields, dim, x, dy, dx));
  }

 private:
  struct Staging {
    void* host = nullptr;  // pinned
    cudaEvent_t done = nullptr;
  };
  struct Scratch {
    void* ptr = nullptr;
    int64_t bytes = 0;
  };
  enum ScratchSlot {
    kOnes,
    kLoss,
    kHits,
    kKeys,
    kOrder,
    kCounts,
    kStarts,
    kNumSlots
  };

  // Whether [ptr, ptr + bytes) lies in one block of AllocateHost's.
  bool Pinned(const void* ptr, int64_t bytes) {
    const char* p = static_cast<const char*>(ptr);
    std::lock_guard<std::mutex> lock(pinned_mu_);
    auto it = pinned_.upper_bound(p);
    if (it == pinned_.begin()) return false;
    --it;
    return p + bytes <= it->first + it->second;
  }

  // Work queued on `later` from now on runs after the work queued on
  // `earlier` so far (an event, the host does not wait); then publishes
  // the device status to the uploading thread.
  void OrderStreams(cudaStream_t earlier, cudaStream_t later, cudaEvent_t event,
                    const char* what) {
    if (Ready()) {
      Check(cudaEventRecord(event, earlier),
            absl::StrCat("cudaEventRecord (", what, ")").c_str());
      Check(cudaStreamWaitEvent(later, event, 0),
            absl::StrCat("cudaStreamWaitEvent (", what, ")").c_str());
    }
    device_failed_.store(!status_.ok(), std::memory_order_release);
  }

  // False once an error happened; makes the GPU current for this thread.
  bool Ready() {
    if (!status_.ok()) return false;
    return Check(cudaSetDevice(ordinal_), "cudaSetDevice");
  }

  bool Check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return true;
    if (status_.ok()) {
      status_.Update(absl::InternalError(
          absl::StrCat(name_, ": ", what, " failed: ", cudaGetErrorName(err),
                       " (", cudaGetErrorString(err), ")")));
    }
    return false;
  }

  bool CheckBlas(cublasStatus_t err, const char* what) {
    if (err == CUBLAS_STATUS_SUCCESS) return true;
    if (status_.ok()) {
      status_.Update(absl::InternalError(
          absl::StrCat(name_, ": ", what, " failed: ", CublasName(err))));
    }
    return false;
  }

  bool CheckLaunch(const char* kernel) {
    return CheckLaunch(kernel, cudaGetLastError());
  }

  // For the launch functions of cuda_nn_kernels.cuh, which return the
  // launch's error themselves.
  bool CheckLaunch(const char* kernel, cudaError_t err) {
    return Check(err,
                 absl::StrCat("launch of the ", kernel, " kernel").c_str());
  }

  // Thrust reports errors by throwing; none may leave the backend.
  template <typename F>
  void RunThrust(const char* what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      if (status_.ok()) {
        status_.Update(absl::InternalError(
            absl::StrCat(name_, ": Thrust in ", what, " failed: ", e.what())));
      }
    }
  }

  // cuBLAS's 32-bit interface takes int sizes: a larger one is refused
  // (InvalidArgument naming the op) rather than cast into a wrong product.
  bool FitsInt(const char* op, std::initializer_list<int64_t> sizes) {
    for (int64_t v : sizes) {
      if (v > std::numeric_limits<int>::max()) {
        if (status_.ok()) {
          status_ = absl::InvalidArgumentError(
              absl::StrCat(name_, ": ", op, " of a dimension of ", v,
                           " is larger than cuBLAS's 32-bit sizes allow"));
        }
        return false;
      }
    }
    return true;
  }

  // A device buffer of at least `bytes` kept between calls.
  void* ScratchBytes(ScratchSlot slot, int64_t bytes) {
    Scratch& s = scratch_[slot];
    if (s.bytes < bytes) {
      if (s.ptr != nullptr) {
        Check(cudaStreamSynchronize(stream_),
              "cudaStreamSynchronize (scratch)");
        Check(cudaFree(s.ptr), "cudaFree (scratch)");
        s.ptr = nullptr;
        s.bytes = 0;
        if (slot == kOnes) ones_filled_ = 0;
      }
      if (!Check(cudaMalloc(&s.ptr, bytes), "cudaMalloc (scratch)")) {
        s.ptr = nullptr;
        return nullptr;
      }
      s.bytes = bytes;
    }
    return s.ptr;
  }

  const int ordinal_;
  const std::string name_;
  absl::Status status_;
  cudaStream_t stream_ = nullptr;
  const CublasApi* cublas_ = nullptr;  // set by Init before blas_
  cublasHandle_t blas_ = nullptr;
  Staging upload_[2], download_[2];
  int next_upload_ = 0;
  Scratch scratch_[kNumSlots];
  ThrustScratch thrust_scratch_;
  int64_t ones_filled_ = 0;
  // AllocateHost's pinned blocks (start, bytes); host buffers are made and
  // freed by their owners' threads, so this has a lock of its own.
  std::mutex pinned_mu_;
  std::map<const char*, int64_t> pinned_;
  // Uploads (Upload, AwaitUploads, ReleaseUploads): their stream, the
  // events that order it against stream_ both ways, the first failed
  // upload, and whether the ops' thread had seen a device error when it
  // last ordered the queues (then nothing more is uploaded).
  cudaStream_t upload_stream_ = nullptr;
  cudaEvent_t uploaded_ = nullptr;
  cudaEvent_t released_ = nullptr;
  std::mutex upload_mu_;
  absl::Status upload_status_;
  std::atomic<bool> device_failed_{false};
};

}  // namespace

bool CudaBackendBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Backend>> NewCudaBackend(int ordinal) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat(
        "no GPU answers: CUDA runtime says ", cudaGetErrorString(err)));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::UnavailableError(
        absl::StrCat("no GPU cuda:", ordinal, ": ", count,
                     " GPU(s) answer (ordinals count the GPUs that "
                     "CUDA_VISIBLE_DEVICES leaves visible)"));
  }
  // The start line names the device: model, memory, compute capability
  // and the driver's CUDA version.
  cudaDeviceProp prop;
  std::string name = absl::StrCat("cuda:", ordinal);
  if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    absl::StrAppend(&name, " (", prop.name, ", ", prop.totalGlobalMem >> 20,
                    " MiB, sm_", prop.major, prop.minor, ", driver CUDA ",
                    driver / 1000, ".", (driver % 1000) / 10, ")");
  }
  auto backend = std::make_unique<CudaBackend>(ordinal, name);
  if (absl::Status s = backend->Init(); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace tessera
