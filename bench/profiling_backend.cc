#include "bench/profiling_backend.h"

namespace tessera {

void ProfilingBackend::Start() {
  recording_ = true;
  current_ = -1;
  parts_.clear();
  timer_.TakeIntervals();  // drop marks of an unfinished round
}

bool ProfilingBackend::Stop(double seconds[kNumParts]) {
  if (!recording_) return false;
  recording_ = false;
  if (parts_.empty()) return true;
  timer_.Mark();
  const std::vector<double> intervals = timer_.TakeIntervals();
  if (intervals.size() != parts_.size()) return false;
  for (size_t i = 0; i < parts_.size(); ++i) seconds[parts_[i]] += intervals[i];
  return inner_->status().ok();
}

void ProfilingBackend::Enter(Part part) {
  if (!recording_ || current_ == part) return;
  timer_.Mark();
  parts_.push_back(part);
  current_ = part;
}

void* ProfilingBackend::AllocateBytes(int64_t bytes) {
  return inner_->AllocateBytes(bytes);
}

void ProfilingBackend::FreeBytes(void* ptr) { inner_->FreeBytes(ptr); }

void ProfilingBackend::CopyToDevice(const void* host, void* device,
                                    int64_t bytes) {
  Enter(kCopyIn);
  inner_->CopyToDevice(host, device, bytes);
}

void ProfilingBackend::CopyToHost(const void* device, void* host,
                                  int64_t bytes) {
  Enter(kCopyOut);
  inner_->CopyToHost(device, host, bytes);
}

void ProfilingBackend::CopyOnDevice(const void* from, void* to, int64_t bytes) {
  Enter(kCompute);
  inner_->CopyOnDevice(from, to, bytes);
}

void ProfilingBackend::Gemm(bool transpose_a, bool transpose_b, int64_t m,
                            int64_t n, int64_t k, float alpha, const float* a,
                            const float* b, float beta, float* c) {
  Enter(kCompute);
  if (recording_) gemms_.push_back({transpose_a, transpose_b, m, n, k});
  inner_->Gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
}

void ProfilingBackend::AddBias(const float* bias, int64_t rows, int64_t cols,
                               float* x) {
  Enter(kCompute);
  inner_->AddBias(bias, rows, cols, x);
}

void ProfilingBackend::BiasGrad(const float* dy, int64_t rows, int64_t cols,
                                float* dbias) {
  Enter(kCompute);
  inner_->BiasGrad(dy, rows, cols, dbias);
}

void ProfilingBackend::Relu(int64_t n, float* x) {
  Enter(kCompute);
  inner_->Relu(n, x);
}

void ProfilingBackend::ReluGrad(const float* y, int64_t n, float* dy) {
  Enter(kCompute);
  inner_->ReluGrad(y, n, dy);
}

void ProfilingBackend::Dropout(uint64_t seed, float rate, int64_t n, float* x) {
  Enter(kCompute);
  inner_->Dropout(seed, rate, n, x);
}

double ProfilingBackend::SoftmaxCrossEntropy(const float* logits,
                                             const int32_t* labels,
                                             int64_t rows, int64_t classes,
                                             float* dlogits, int64_t* correct) {
  Enter(kCompute);
  return inner_->SoftmaxCrossEntropy(logits, labels, rows, classes, dlogits,
                                     correct);
}

double ProfilingBackend::SigmoidCrossEntropy(const float* logits,
                                             const float* targets, int64_t rows,
                                             int64_t cols, float* dlogits) {
  Enter(kCompute);
  return inner_->SigmoidCrossEntropy(logits, targets, rows, cols, dlogits);
}

void ProfilingBackend::EmbeddingBagForward(const float* table, int64_t dim,
                                           const int64_t* offsets,
                                           const int64_t* ids, int64_t bags,
                                           Combiner combiner, float* out,
                                           int64_t stride) {
  Enter(kCompute);
  inner_->EmbeddingBagForward(table, dim, offsets, ids, bags, combiner, out,
                              stride);
}

void ProfilingBackend::EmbeddingBagBackward(const float* dout, int64_t dim,
                                            const int64_t* offsets,
                                            int64_t bags, Combiner combiner,
                                            float* drows, int64_t stride) {
  Enter(kCompute);
  inner_->EmbeddingBagBackward(dout, dim, offsets, bags, combiner, drows,
                               stride);
}

int64_t ProfilingBackend::ReduceSparseGrad(const int64_t* ids,
                                           const float* rows, int64_t n,
                                           int64_t dim, int64_t* unique_ids,
                                           float* summed_rows) {
  Enter(kCompute);
  return inner_->ReduceSparseGrad(ids, rows, n, dim, unique_ids, summed_rows);
}

void ProfilingBackend::Fill(int64_t n, float value, float* x) {
  Enter(kCompute);
  inner_->Fill(n, value, x);
}

void ProfilingBackend::Axpby(int64_t n, float alpha, const float* x, float beta,
                             float* y) {
  Enter(kCompute);
  inner_->Axpby(n, alpha, x, beta, y);
}

void ProfilingBackend::Mul(int64_t n, const float* a, const float* b,
                           float beta, float* out) {
  Enter(kCompute);
  inner_->Mul(n, a, b, beta, out);
}

void ProfilingBackend::UnaryForward(Unary kind, int64_t n, const float* x,
                                    float* y) {
  Enter(kCompute);
  inner_->UnaryForward(kind, n, x, y);
}

void ProfilingBackend::UnaryBackward(Unary kind, int64_t n, const float* y,
                                     const float* dy, float* dx) {
  Enter(kCompute);
  inner_->UnaryBackward(kind, n, y, dy, dx);
}

void ProfilingBackend::SoftmaxForward(int64_t rows, int64_t cols,
                                      const float* x, float* y) {
  Enter(kCompute);
  inner_->SoftmaxForward(rows, cols, x, y);
}

void ProfilingBackend::SoftmaxBackward(int64_t rows, int64_t cols,
                                       const float* y, const float* dy,
                                       float* dx) {
  Enter(kCompute);
  inner_->SoftmaxBackward(rows, cols, y, dy, dx);
}

double ProfilingBackend::MeanSquaredError(const float* pred,
                                          const float* target, int64_t rows,
                                          int64_t cols, float* dpred) {
  Enter(kCompute);
  return inner_->MeanSquaredError(pred, target, rows, cols, dpred);
}

void ProfilingBackend::Copy2D(int64_t rows, int64_t cols, const float* src,
                              int64_t src_stride, float* dst,
                              int64_t dst_stride, float beta) {
  Enter(kCompute);
  inner_->Copy2D(rows, cols, src, src_stride, dst, dst_stride, beta);
}

void ProfilingBackend::BatchedGemm(bool transpose_a, bool transpose_b,
                                   int64_t m, int64_t n, int64_t k, float alpha,
                                   const float* a, int64_t stride_a,
                                   const float* b, int64_t stride_b, float beta,
                                   float* c, int64_t stride_c, int64_t batch) {
  Enter(kCompute);
  if (recording_) {
    for (int64_t i = 0; i < batch; ++i) {
      gemms_.push_back({transpose_a, transpose_b, m, n, k});
    }
  }
  inner_->BatchedGemm(transpose_a, transpose_b, m, n, k, alpha, a, stride_a, b,
                      stride_b, beta, c, stride_c, batch);
}

void ProfilingBackend::GatherColumns(int64_t rows, int64_t in_cols,
                                     const float* x, int64_t n,
                                     const int32_t* index, float* y) {
  Enter(kCompute);
  inner_->GatherColumns(rows, in_cols, x, n, index, y);
}

void ProfilingBackend::ScatterColumns(int64_t rows, int64_t n, const float* dy,
                                      const int32_t* index, int64_t out_cols,
                                      float* dx) {
  Enter(kCompute);
  inner_->ScatterColumns(rows, n, dy, index, out_cols, dx);
}

void ProfilingBackend::ScaleRows(int64_t rows, int64_t cols, const float* x,
                                 const float* s, float beta, float* y) {
  Enter(kCompute);
  inner_->ScaleRows(rows, cols, x, s, beta, y);
}

void ProfilingBackend::RowDot(int64_t rows, int64_t cols, const float* a,
                              const float* b, float* out) {
  Enter(kCompute);
  inner_->RowDot(rows, cols, a, b, out);
}

void ProfilingBackend::Im2Col(const Window2D& g, const float* x, float* cols) {
  Enter(kCompute);
  inner_->Im2Col(g, x, cols);
}

void ProfilingBackend::Col2Im(const Window2D& g, const float* cols, float* dx) {
  Enter(kCompute);
  inner_->Col2Im(g, cols, dx);
}

void ProfilingBackend::MaxPoolForward(const Window2D& g, const float* x,
                                      float* y, int64_t* argmax) {
  Enter(kCompute);
  inner_->MaxPoolForward(g, x, y, argmax);
}

void ProfilingBackend::MaxPoolBackward(const Window2D& g, const float* dy,
                                       const int64_t* argmax, float* dx) {
  Enter(kCompute);
  inner_->MaxPoolBackward(g, dy, argmax, dx);
}

void ProfilingBackend::ColumnMoments(int64_t rows, int64_t cols, const float* x,
                                     float* mean, float* var) {
  Enter(kCompute);
  inner_->ColumnMoments(rows, cols, x, mean, var);
}

void ProfilingBackend::BatchNormForward(int64_t rows, int64_t cols,
                                        const float* x, const float* mean,
                                        const float* var, const float* gamma,
                                        const float* beta, float epsilon,
                                        float* y) {
  Enter(kCompute);
  inner_->BatchNormForward(rows, cols, x, mean, var, gamma, beta, epsilon, y);
}

void ProfilingBackend::BatchNormBackward(int64_t rows, int64_t cols,
                                         const float* x, const float* mean,
                                         const float* var, const float* gamma,
                                         float epsilon, const float* dy,
                                         float* dx, float* dgamma,
                                         float* dbeta) {
  Enter(kCompute);
  inner_->BatchNormBackward(rows, cols, x, mean, var, gamma, epsilon, dy, dx,
                            dgamma, dbeta);
}

void ProfilingBackend::LayerNormForward(int64_t rows, int64_t cols,
                                        const float* x, const float* gamma,
                                        const float* beta, float epsilon,
                                        float* y, float* mean, float* rstd) {
  Enter(kCompute);
  inner_->LayerNormForward(rows, cols, x, gamma, beta, epsilon, y, mean, rstd);
}

void ProfilingBackend::LayerNormBackward(int64_t rows, int64_t cols,
                                         const float* x, const float* mean,
                                         const float* rstd, const float* gamma,
                                         const float* dy, float* dx,
                                         float* dgamma, float* dbeta) {
  Enter(kCompute);
  inner_->LayerNormBackward(rows, cols, x, mean, rstd, gamma, dy, dx, dgamma,
                            dbeta);
}

void ProfilingBackend::FmOrder2Forward(int64_t batch, int64_t fields,
                                       int64_t dim, const float* x, float* y) {
  Enter(kCompute);
  inner_->FmOrder2Forward(batch, fields, dim, x, y);
}

void ProfilingBackend::FmOrder2Backward(int64_t batch, int64_t fields,
                                        int64_t dim, const float* x,
                                        const float* dy, float* dx) {
  Enter(kCompute);
  inner_->FmOrder2Backward(batch, fields, dim, x, dy, dx);
}

}  // namespace tessera
