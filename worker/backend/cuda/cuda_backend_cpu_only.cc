// The CPU-only twin of cuda_backend.cu, for builds without nvcc.
#include "worker/backend/cuda/cuda_backend.h"

namespace tessera {

bool CudaBackendBuilt() { return false; }

absl::StatusOr<std::unique_ptr<Backend>> NewCudaBackend(int ordinal) {
  return absl::UnavailableError(
      "this build has no CUDA backend (nvcc was not found when it was "
      "configured)");
}

}  // namespace tessera
