#ifndef TESSERA_WORKER_BACKEND_CPU_CPU_BACKEND_H_
#define TESSERA_WORKER_BACKEND_CPU_CPU_BACKEND_H_

#include "worker/backend/backend.h"

namespace tessera {

// The reference backend: host memory, Eigen for matrix products, plain
// loops for the elementwise ops. Single-threaded, so several workers on
// one machine do not fight over cores.
class CpuBackend : public Backend {
 public:
  std::string device_name() const override { return "cpu"; }
  bool device_is_host() const override { return true; }
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
};

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CPU_CPU_BACKEND_H_
