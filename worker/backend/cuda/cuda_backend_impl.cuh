#ifndef TESSERA_WORKER_BACKEND_CUDA_CUDA_BACKEND_IMPL_CUH_
#define TESSERA_WORKER_BACKEND_CUDA_CUDA_BACKEND_IMPL_CUH_

// The CUDA backend's class (cuda_backend.h describes it), shared by the
// files that define its methods, one concept each:
//   cuda_backend.cu       making it: the device, stream, cuBLAS handle and
//                         staging buffers, and its sticky error
//   cuda_memory.cu        device and pinned host memory, the copies through
//                         the staging buffers, the upload stream
//   cuda_blas_ops.cu      the ops cuBLAS computes (Gemm, BatchedGemm,
//                         BiasGrad)
//   cuda_loss_ops.cu      the losses, summed by Thrust
//   cuda_embedding_ops.cu embedding bags and sparse-gradient reduction
//   cuda_nn_ops.cu        the elementwise and layer-library ops
// The kernels are in cuda_core_kernels.cu and cuda_nn_kernels.cu.
//
// Included only by .cu files.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/backend/backend.h"
#include "worker/backend/cuda/cublas_library.h"
#include "worker/backend/cuda/thrust_scratch.cuh"

namespace tessera {

class CudaBackend final : public Backend {
 public:
  CudaBackend(int ordinal, std::string name)
      : ordinal_(ordinal), name_(std::move(name)) {}
  ~CudaBackend() override;

  // Creates the stream, the cuBLAS handle and the staging buffers.
  absl::Status Init();

  std::string device_name() const override { return name_; }
  absl::Status status() const override { return status_; }
  void* native_stream() const override { return stream_; }

  // Memory and copies (cuda_memory.cu).
  void* AllocateBytes(int64_t bytes) override;
  void FreeBytes(void* ptr) override;
  void* AllocateHost(int64_t bytes) override;
  void FreeHost(void* ptr) override;
  void CopyToDevice(const void* host, void* device, int64_t bytes) override;
  void Upload(const void* host, void* device, int64_t bytes) override;
  void AwaitUploads() override;
  void ReleaseUploads() override;
  void CopyToHost(const void* device, void* host, int64_t bytes) override;
  void CopyOnDevice(const void* from, void* to, int64_t bytes) override;
  absl::Status Synchronize() override;

  // cuBLAS (cuda_blas_ops.cu).
  void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
            float alpha, const float* a, const float* b, float beta,
            float* c) override;
  void BatchedGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                   int64_t k, float alpha, const float* a, int64_t stride_a,
                   const float* b, int64_t stride_b, float beta, float* c,
                   int64_t stride_c, int64_t batch) override;
  void BiasGrad(const float* dy, int64_t rows, int64_t cols,
                float* dbias) override;

  // Losses (cuda_loss_ops.cu).
  double SoftmaxCrossEntropy(const float* logits, const int32_t* labels,
                             int64_t rows, int64_t classes, float* dlogits,
                             int64_t* correct) override;
  double SigmoidCrossEntropy(const float* logits, const float* targets,
                             int64_t rows, int64_t cols,
                             float* dlogits) override;
  double MeanSquaredError(const float* pred, const float* target, int64_t rows,
                          int64_t cols, float* dpred) override;

  // Embeddings (cuda_embedding_ops.cu).
  void EmbeddingBagForward(const float* table, int64_t dim,
                           const int64_t* offsets, const int64_t* ids,
                           int64_t bags, Combiner combiner, float* out,
                           int64_t stride) override;
  void EmbeddingBagBackward(const float* dout, int64_t dim,
                            const int64_t* offsets, int64_t bags,
                            Combiner combiner, float* drows,
                            int64_t stride) override;
  int64_t ReduceSparseGrad(const int64_t* ids, const float* rows, int64_t n,
                           int64_t dim, int64_t* unique_ids,
                           float* summed_rows) override;

  // Elementwise and layer-library ops (cuda_nn_ops.cu).
  void AddBias(const float* bias, int64_t rows, int64_t cols,
               float* x) override;
  void Relu(int64_t n, float* x) override;
  void ReluGrad(const float* y, int64_t n, float* dy) override;
  void Dropout(uint64_t seed, float rate, int64_t n, float* x) override;
  void Fill(int64_t n, float value, float* x) override;
  void Axpby(int64_t n, float alpha, const float* x, float beta,
             float* y) override;
  void Mul(int64_t n, const float* a, const float* b, float beta,
           float* out) override;
  void UnaryForward(Unary kind, int64_t n, const float* x, float* y) override;
  void UnaryBackward(Unary kind, int64_t n, const float* y, const float* dy,
                     float* dx) override;
  void SoftmaxForward(int64_t rows, int64_t cols, const float* x,
                      float* y) override;
  void SoftmaxBackward(int64_t rows, int64_t cols, const float* y,
                       const float* dy, float* dx) override;
  void Copy2D(int64_t rows, int64_t cols, const float* src, int64_t src_stride,
              float* dst, int64_t dst_stride, float beta) override;
  void GatherColumns(int64_t rows, int64_t in_cols, const float* x, int64_t n,
                     const int32_t* index, float* y) override;
  void ScatterColumns(int64_t rows, int64_t n, const float* dy,
                      const int32_t* index, int64_t out_cols,
                      float* dx) override;
  void ScaleRows(int64_t rows, int64_t cols, const float* x, const float* s,
                 float beta, float* y) override;
  void RowDot(int64_t rows, int64_t cols, const float* a, const float* b,
              float* out) override;
  void Im2Col(const Window2D& g, const float* x, float* cols) override;
  void Col2Im(const Window2D& g, const float* cols, float* dx) override;
  void MaxPoolForward(const Window2D& g, const float* x, float* y,
                      int64_t* argmax) override;
  void MaxPoolBackward(const Window2D& g, const float* dy,
                       const int64_t* argmax, float* dx) override;
  void ColumnMoments(int64_t rows, int64_t cols, const float* x, float* mean,
                     float* var) override;
  void BatchNormForward(int64_t rows, int64_t cols, const float* x,
                        const float* mean, const float* var, const float* gamma,
                        const float* beta, float epsilon, float* y) override;
  void BatchNormBackward(int64_t rows, int64_t cols, const float* x,
                         const float* mean, const float* var,
                         const float* gamma, float epsilon, const float* dy,
                         float* dx, float* dgamma, float* dbeta) override;
  void LayerNormForward(int64_t rows, int64_t cols, const float* x,
                        const float* gamma, const float* beta, float epsilon,
                        float* y, float* mean, float* rstd) override;
  void LayerNormBackward(int64_t rows, int64_t cols, const float* x,
                         const float* mean, const float* rstd,
                         const float* gamma, const float* dy, float* dx,
                         float* dgamma, float* dbeta) override;
  void FmOrder2Forward(int64_t batch, int64_t fields, int64_t dim,
                       const float* x, float* y) override;
  void FmOrder2Backward(int64_t batch, int64_t fields, int64_t dim,
                        const float* x, const float* dy, float* dx) override;

 private:
  static constexpr int64_t kStagingBytes = 4 << 20;  // per staging buffer

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
  bool Pinned(const void* ptr, int64_t bytes);

  // Work queued on `later` from now on runs after the work queued on
  // `earlier` so far (an event, the host does not wait); then publishes
  // the device status to the uploading thread.
  void OrderStreams(cudaStream_t earlier, cudaStream_t later, cudaEvent_t event,
                    const char* what);

  // False once an error happened; makes the GPU current for this thread.
  bool Ready();

  // Each records the first failure in status_ (naming the device, `what`
  // and the error) and returns whether the call succeeded.
  bool Check(cudaError_t err, const char* what);
  bool CheckBlas(cublasStatus_t err, const char* what);
  bool CheckLaunch(const char* kernel) {
    return CheckLaunch(kernel, cudaGetLastError());
  }
  // For the launch functions of cuda_core_kernels.cuh and
  // cuda_nn_kernels.cuh, which return the launch's error themselves.
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
  bool FitsInt(const char* op, std::initializer_list<int64_t> sizes);

  // A device buffer of at least `bytes` kept between calls.
  void* ScratchBytes(ScratchSlot slot, int64_t bytes);

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

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CUDA_CUDA_BACKEND_IMPL_CUH_
