// A Backend that runs every op on another one and profiles steps for the
// benchmark: which part of a step each op belongs to (copies to the
// device, compute, copies to the host), timed by a StreamTimer at every
// change of part (CUDA events on the GPU's stream), and the shapes of the
// matrix products, to time them alone.
//
// Thread safety: as the backend it wraps.

#ifndef TESSERA_BENCH_PROFILING_BACKEND_H_
#define TESSERA_BENCH_PROFILING_BACKEND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/stream_timer.h"
#include "worker/backend/backend.h"

namespace tessera {

struct GemmCall {
  bool ta, tb;
  int64_t m, n, k;
};

class ProfilingBackend final : public Backend {
 public:
  enum Part { kCopyIn, kCompute, kCopyOut, kNumParts };

  // `inner` must outlive this.
  explicit ProfilingBackend(Backend* inner) : inner_(inner), timer_(inner) {}

  // From now on every change of part is marked and every GEMM noted.
  void Start();
  // Stops recording, waits for the device, and adds each part's seconds
  // since Start into seconds[part]; false after a device error.
  bool Stop(double seconds[kNumParts]);
  // The GEMMs (batched ones expanded) since the last ClearGemms.
  const std::vector<GemmCall>& gemms() const { return gemms_; }
  void ClearGemms() { gemms_.clear(); }

  std::string device_name() const override { return inner_->device_name(); }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::Status status() const override { return inner_->status(); }
  void* AllocateHost(int64_t bytes) override {
    return inner_->AllocateHost(bytes);
  }
  void FreeHost(void* ptr) override { inner_->FreeHost(ptr); }
  void* native_stream() const override { return inner_->native_stream(); }
  bool device_is_host() const override { return inner_->device_is_host(); }
  void Upload(const void* host, void* device, int64_t bytes) override {
    inner_->Upload(host, device, bytes);
  }
  void AwaitUploads() override { inner_->AwaitUploads(); }
  void ReleaseUploads() override { inner_->ReleaseUploads(); }

  void* AllocateBytes(int64_t bytes) override;
  void FreeBytes(void* ptr) override;
  void CopyToDevice(const void* host, void* device, int64_t bytes) override;
  void CopyToHost(const void* device, void* host, int64_t bytes) override;
  void CopyOnDevice(const void* from, void* to, int64_t bytes) override;
  void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
            float alpha, const float* a, const float* b, float beta,
            float* c) override;
  void AddBias(const float* bias, int64_t rows, int64_t cols,
               float* x) override;
  void BiasGrad(const float* dy, int64_t rows, int64_t cols,
                float* dbias) override;
  void Relu(int64_t n, float* x) override;
  void ReluGrad(const float* y, int64_t n, float* dy) override;
  void Dropout(uint64_t seed, float rate, int64_t n, float* x) override;
  double SoftmaxCrossEntropy(const float* logits, const int32_t* labels,
                             int64_t rows, int64_t classes, float* dlogits,
                             int64_t* correct) override;
  double SigmoidCrossEntropy(const float* logits, const float* targets,
                             int64_t rows, int64_t cols,
                             float* dlogits) override;
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
  double MeanSquaredError(const float* pred, const float* target, int64_t rows,
                          int64_t cols, float* dpred) override;
  void Copy2D(int64_t rows, int64_t cols, const float* src, int64_t src_stride,
              float* dst, int64_t dst_stride, float beta) override;
  void BatchedGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                   int64_t k, float alpha, const float* a, int64_t stride_a,
                   const float* b, int64_t stride_b, float beta, float* c,
                   int64_t stride_c, int64_t batch) override;
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
  // Marks a change into `part` while recording.
  void Enter(Part part);

  Backend* const inner_;
  StreamTimer timer_;
  bool recording_ = false;
  int current_ = -1;         // the part of the last op while recording
  std::vector<Part> parts_;  // the part after each mark but the last
  std::vector<GemmCall> gemms_;
};

}  // namespace tessera

#endif  // TESSERA_BENCH_PROFILING_BACKEND_H_
