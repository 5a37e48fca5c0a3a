#include <cstdint>

#include "worker/backend/cuda/cuda_backend_impl.cuh"
#include "worker/backend/cuda/cuda_core_kernels.cuh"
#include "worker/backend/cuda/cuda_nn_kernels.cuh"

namespace tessera {

// The elementwise ops and the layer library's: kernels in
// cuda_core_kernels.cu and cuda_nn_kernels.cu.

void CudaBackend::AddBias(const float* bias, int64_t rows, int64_t cols,
                          float* x) {
  if (rows * cols <= 0 || !Ready()) return;
  CheckLaunch("AddBias", LaunchAddBias(stream_, bias, rows, cols, x));
}

void CudaBackend::Relu(int64_t n, float* x) {
  if (n <= 0 || !Ready()) return;
  CheckLaunch("Relu", LaunchRelu(stream_, n, x));
}

void CudaBackend::ReluGrad(const float* y, int64_t n, float* dy) {
  if (n <= 0 || !Ready()) return;
  CheckLaunch("ReluGrad", LaunchReluGrad(stream_, y, n, dy));
}

void CudaBackend::Dropout(uint64_t seed, float rate, int64_t n, float* x) {
  if (rate <= 0.0f || n <= 0 || !Ready()) return;
  const float scale = 1.0f / (1.0f - rate);  // as the CPU computes it
  CheckLaunch("Dropout", LaunchDropout(stream_, seed, rate, scale, n, x));
}

void CudaBackend::Fill(int64_t n, float value, float* x) {
  if (n <= 0 || !Ready()) return;
  CheckLaunch("Fill", LaunchFill(stream_, n, value, x));
}

void CudaBackend::Axpby(int64_t n, float alpha, const float* x, float beta,
                        float* y) {
  if (n <= 0 || !Ready()) return;
  CheckLaunch("Axpby", LaunchAxpby(stream_, n, alpha, x, beta, y));
}

void CudaBackend::Mul(int64_t n, const float* a, const float* b, float beta,
                      float* out) {
  if (n <= 0 || !Ready()) return;
  CheckLaunch("Mul", LaunchMul(stream_, n, a, b, beta, out));
}

void CudaBackend::UnaryForward(Unary kind, int64_t n, const float* x,
                               float* y) {
  if (n <= 0 || !Ready()) return;
  CheckLaunch("UnaryForward", LaunchUnaryForward(stream_, kind, n, x, y));
}

void CudaBackend::UnaryBackward(Unary kind, int64_t n, const float* y,
                                const float* dy, float* dx) {
  if (n <= 0 || !Ready()) return;
  CheckLaunch("UnaryBackward",
              LaunchUnaryBackward(stream_, kind, n, y, dy, dx));
}

void CudaBackend::SoftmaxForward(int64_t rows, int64_t cols, const float* x,
                                 float* y) {
  if (rows <= 0 || cols <= 0 || !Ready()) return;
  CheckLaunch("SoftmaxForward",
              LaunchSoftmaxForward(stream_, rows, cols, x, y));
}

void CudaBackend::SoftmaxBackward(int64_t rows, int64_t cols, const float* y,
                                  const float* dy, float* dx) {
  if (rows <= 0 || cols <= 0 || !Ready()) return;
  CheckLaunch("SoftmaxBackward",
              LaunchSoftmaxBackward(stream_, rows, cols, y, dy, dx));
}

void CudaBackend::Copy2D(int64_t rows, int64_t cols, const float* src,
                         int64_t src_stride, float* dst, int64_t dst_stride,
                         float beta) {
  if (rows <= 0 || cols <= 0 || !Ready()) return;
  CheckLaunch("Copy2D", LaunchCopy2D(stream_, rows, cols, src, src_stride, dst,
                                     dst_stride, beta));
}

void CudaBackend::GatherColumns(int64_t rows, int64_t in_cols, const float* x,
                                int64_t n, const int32_t* index, float* y) {
  if (rows <= 0 || n <= 0 || !Ready()) return;
  CheckLaunch("GatherColumns",
              LaunchGatherColumns(stream_, rows, in_cols, x, n, index, y));
}

void CudaBackend::ScatterColumns(int64_t rows, int64_t n, const float* dy,
                                 const int32_t* index, int64_t out_cols,
                                 float* dx) {
  if (rows <= 0 || out_cols <= 0 || !Ready()) return;
  CheckLaunch("ScatterColumns",
              LaunchScatterColumns(stream_, rows, n, dy, index, out_cols, dx));
}

void CudaBackend::ScaleRows(int64_t rows, int64_t cols, const float* x,
                            const float* s, float beta, float* y) {
  if (rows <= 0 || cols <= 0 || !Ready()) return;
  CheckLaunch("ScaleRows", LaunchScaleRows(stream_, rows, cols, x, s, beta, y));
}

void CudaBackend::RowDot(int64_t rows, int64_t cols, const float* a,
                         const float* b, float* out) {
  if (rows <= 0 || !Ready()) return;
  CheckLaunch("RowDot", LaunchRowDot(stream_, rows, cols, a, b, out));
}

void CudaBackend::Im2Col(const Window2D& g, const float* x, float* cols) {
  if (g.batch * g.out_h * g.out_w * g.kernel_h * g.kernel_w * g.channels <= 0 ||
      !Ready()) {
    return;
  }
  CheckLaunch("Im2Col", LaunchIm2Col(stream_, g, x, cols));
}

void CudaBackend::Col2Im(const Window2D& g, const float* cols, float* dx) {
  if (g.batch * g.height * g.width * g.channels <= 0 || !Ready()) return;
  CheckLaunch("Col2Im", LaunchCol2Im(stream_, g, cols, dx));
}

void CudaBackend::MaxPoolForward(const Window2D& g, const float* x, float* y,
                                 int64_t* argmax) {
  if (g.batch * g.out_h * g.out_w * g.channels <= 0 || !Ready()) return;
  CheckLaunch("MaxPoolForward", LaunchMaxPoolForward(stream_, g, x, y, argmax));
}

void CudaBackend::MaxPoolBackward(const Window2D& g, const float* dy,
                                  const int64_t* argmax, float* dx) {
  if (g.batch * g.height * g.width * g.channels <= 0 || !Ready()) return;
  CheckLaunch("MaxPoolBackward",
              LaunchMaxPoolBackward(stream_, g, dy, argmax, dx));
}

void CudaBackend::ColumnMoments(int64_t rows, int64_t cols, const float* x,
                                float* mean, float* var) {
  if (cols <= 0 || !Ready()) return;
  CheckLaunch("ColumnMoments",
              LaunchColumnMoments(stream_, rows, cols, x, mean, var));
}

void CudaBackend::BatchNormForward(int64_t rows, int64_t cols, const float* x,
                                   const float* mean, const float* var,
                                   const float* gamma, const float* beta,
                                   float epsilon, float* y) {
  if (rows <= 0 || cols <= 0 || !Ready()) return;
  CheckLaunch("BatchNormForward",
              LaunchBatchNormForward(stream_, rows, cols, x, mean, var, gamma,
                                     beta, epsilon, y));
}

void CudaBackend::BatchNormBackward(int64_t rows, int64_t cols, const float* x,
                                    const float* mean, const float* var,
                                    const float* gamma, float epsilon,
                                    const float* dy, float* dx, float* dgamma,
                                    float* dbeta) {
  if (cols <= 0 || !Ready()) return;
  CheckLaunch("BatchNormBackward",
              LaunchBatchNormBackward(stream_, rows, cols, x, mean, var, gamma,
                                      epsilon, dy, dx, dgamma, dbeta));
}

void CudaBackend::LayerNormForward(int64_t rows, int64_t cols, const float* x,
                                   const float* gamma, const float* beta,
                                   float epsilon, float* y, float* mean,
                                   float* rstd) {
  if (rows <= 0 || cols <= 0 || !Ready()) return;
  CheckLaunch("LayerNormForward",
              LaunchLayerNormForward(stream_, rows, cols, x, gamma, beta,
                                     epsilon, y, mean, rstd));
}

void CudaBackend::LayerNormBackward(int64_t rows, int64_t cols, const float* x,
                                    const float* mean, const float* rstd,
                                    const float* gamma, const float* dy,
                                    float* dx, float* dgamma, float* dbeta) {
  if (cols <= 0 || !Ready()) return;
  CheckLaunch("LayerNormBackward",
              LaunchLayerNormBackward(stream_, rows, cols, x, mean, rstd, gamma,
                                      dy, dx, dgamma, dbeta));
}

void CudaBackend::FmOrder2Forward(int64_t batch, int64_t fields, int64_t dim,
                                  const float* x, float* y) {
  if (batch <= 0 || dim <= 0 || !Ready()) return;
  CheckLaunch("FmOrder2Forward",
              LaunchFmOrder2Forward(stream_, batch, fields, dim, x, y));
}

void CudaBackend::FmOrder2Backward(int64_t batch, int64_t fields, int64_t dim,
                                   const float* x, const float* dy, float* dx) {
  if (batch <= 0 || fields <= 0 || dim <= 0 || !Ready()) return;
  CheckLaunch("FmOrder2Backward",
              LaunchFmOrder2Backward(stream_, batch, fields, dim, x, dy, dx));
}

}  // namespace tessera
