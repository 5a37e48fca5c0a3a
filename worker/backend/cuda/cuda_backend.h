#ifndef TESSERA_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_
#define TESSERA_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"

namespace tessera {

// True when this build has the CUDA backend (nvcc was found at configure
// time); false in a CPU-only build, where NewCudaBackend always fails.
bool CudaBackendBuilt();

// The CUDA backend on GPU `ordinal` (counted among the GPUs that
// CUDA_VISIBLE_DEVICES leaves visible): cuBLAS for Gemm and BiasGrad,
// kernels of its own for the elementwise ops, the losses and embedding
// bags, Thrust for sorting, deduplicating and segment-reducing sparse
// gradients. Every op is queued on one CUDA stream of its own
// (native_stream()); host memory from AllocateHost is pinned and copied
// directly, any other host memory goes through pinned staging buffers (two
// per direction, so a copy of a large tensor overlaps the memcpy on the
// host with the DMA). Upload copies on a second stream, ordered against the
// ops' by events (AwaitUploads, ReleaseUploads). FP32
// throughout (no TF32), so results stay within the tolerances of
// tests/worker/backend/cuda/cuda_backend_test.cc of the CPU backend's; dropout
// masks, embedding bags and sparse-gradient reduction are bit-identical to it.
//
// Unavailable when this build has no CUDA, no driver or no such GPU
// answers; the message says which.
absl::StatusOr<std::unique_ptr<Backend>> NewCudaBackend(int ordinal);

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_
