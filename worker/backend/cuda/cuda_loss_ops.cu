#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
#include <thrust/system/cuda/execution_policy.h>

#include <cstdint>

#include "worker/backend/cuda/cuda_backend_impl.cuh"
#include "worker/backend/cuda/cuda_core_kernels.cuh"
#include "worker/backend/cuda/cuda_nn_kernels.cuh"

namespace tessera {

double CudaBackend::SoftmaxCrossEntropy(const float* logits,
                                        const int32_t* labels, int64_t rows,
                                        int64_t classes, float* dlogits,
                                        int64_t* correct) {
  if (correct != nullptr) *correct = 0;
  if (rows <= 0 || !Ready()) return 0;
  double* loss = static_cast<double*>(ScratchBytes(kLoss, rows * 8));
  int64_t* hit = static_cast<int64_t*>(ScratchBytes(kHits, rows * 8));
  if (loss == nullptr || hit == nullptr) return 0;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  if (!CheckLaunch("SoftmaxCrossEntropy",
                   LaunchSoftmaxXent(stream_, logits, labels, rows, classes,
                                     inv_rows, dlogits, loss, hit))) {
    return 0;
  }
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

double CudaBackend::SigmoidCrossEntropy(const float* logits,
                                        const float* targets, int64_t rows,
                                        int64_t cols, float* dlogits) {
  const int64_t n = rows * cols;
  if (n <= 0 || !Ready()) return 0;
  double* loss = static_cast<double*>(ScratchBytes(kLoss, n * 8));
  if (loss == nullptr) return 0;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  if (!CheckLaunch("SigmoidCrossEntropy",
                   LaunchSigmoidXent(stream_, logits, targets, n, inv_rows,
                                     dlogits, loss))) {
    return 0;
  }
  double sum = 0;
  RunThrust("SigmoidCrossEntropy reduction", [&] {
    sum = thrust::reduce(thrust::cuda::par(thrust_scratch_).on(stream_), loss,
                         loss + n, 0.0);
  });
  return sum;
}

// The sum over rows of each row's mean is the sum of every squared error
// divided by cols. thrust::reduce returns to the host, so this waits for
// the stream as an op returning a value must.
double CudaBackend::MeanSquaredError(const float* pred, const float* target,
                                     int64_t rows, int64_t cols, float* dpred) {
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

}  // namespace tessera
