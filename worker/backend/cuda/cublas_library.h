// cuBLAS, loaded with dlopen when the first CUDA backend is made rather
// than linked into every binary that can use a GPU. Loading
// libcublasLt.so runs its static initialisers, which cost a process about
// 150 MB of resident memory (dlopen of libcublasLt.so.13 alone takes a
// process from 1 to 153 MB) whether or not it ever computes on a GPU: a
// worker on the CPU, or one still deciding with --device=auto, should not
// pay that.
//
// Contract:
//  - LoadCublas loads the cuBLAS the build was compiled against
//    (libcublas.so.<CUBLAS_VER_MAJOR>, found where every CUDA library of
//    the node is: cuda_library_search.h) once per process; later calls
//    return the same table, or the same error.
//  - Unavailable when the library or one of its functions cannot be
//    found, naming it and saying what dlopen said.
//  - Thread safety: LoadCublas may be called from any thread.

#ifndef TESSERA_WORKER_BACKEND_CUDA_CUBLAS_LIBRARY_H_
#define TESSERA_WORKER_BACKEND_CUDA_CUBLAS_LIBRARY_H_

#include <cublas_v2.h>

#include "absl/status/statusor.h"

namespace tessera {

// The cuBLAS functions the CUDA backend calls (cublas_v2.h's names map to
// the _v2 symbols).
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  decltype(&cublasSgemv_v2) sgemv = nullptr;
};

absl::StatusOr<const CublasApi*> LoadCublas();

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CUDA_CUBLAS_LIBRARY_H_
