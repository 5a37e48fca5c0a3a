#include <thrust/execution_policy.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/system/cuda/execution_policy.h>

#include <cstdint>

#include "worker/backend/cuda/cuda_backend_impl.cuh"
#include "worker/backend/cuda/cuda_core_kernels.cuh"

namespace tessera {

void CudaBackend::EmbeddingBagForward(const float* table, int64_t dim,
                                      const int64_t* offsets,
                                      const int64_t* ids, int64_t bags,
                                      Combiner combiner, float* out,
                                      int64_t stride) {
  if (bags <= 0 || dim <= 0 || !Ready()) return;
  CheckLaunch(
      "EmbeddingBagForward",
      LaunchEmbeddingBagForward(stream_, table, dim, offsets, ids, bags,
                                combiner == Combiner::kMean, out, stride));
}

void CudaBackend::EmbeddingBagBackward(const float* dout, int64_t dim,
                                       const int64_t* offsets, int64_t bags,
                                       Combiner combiner, float* drows,
                                       int64_t stride) {
  if (bags <= 0 || dim <= 0 || !Ready()) return;
  CheckLaunch(
      "EmbeddingBagBackward",
      LaunchEmbeddingBagBackward(stream_, dout, dim, offsets, bags,
                                 combiner == Combiner::kMean, drows, stride));
}

// Thrust: stable sort of (id, position), run lengths of equal ids by
// reduce_by_key, their starts by exclusive_scan; then a kernel sums each
// run's rows.
int64_t CudaBackend::ReduceSparseGrad(const int64_t* ids, const float* rows,
                                      int64_t n, int64_t dim,
                                      int64_t* unique_ids, float* summed_rows) {
  if (n <= 0 || !Ready()) return 0;
  int64_t* keys = static_cast<int64_t*>(ScratchBytes(kKeys, n * 8));
  int64_t* order = static_cast<int64_t*>(ScratchBytes(kOrder, n * 8));
  int64_t* counts = static_cast<int64_t*>(ScratchBytes(kCounts, n * 8));
  int64_t* starts = static_cast<int64_t*>(ScratchBytes(kStarts, n * 8));
  if (keys == nullptr || order == nullptr || counts == nullptr ||
      starts == nullptr) {
    return 0;
  }
  if (!Check(
          cudaMemcpyAsync(keys, ids, n * 8, cudaMemcpyDeviceToDevice, stream_),
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
  CheckLaunch("ReduceSparseGrad segment sum",
              LaunchSegmentSumRows(stream_, rows, dim, order, starts, counts,
                                   unique, summed_rows));
  return status_.ok() ? unique : 0;
}

}  // namespace tessera
