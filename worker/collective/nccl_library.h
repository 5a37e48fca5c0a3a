// NCCL, loaded with dlopen the first time a mirrored or hybrid group
// negotiates it, rather than linked: a binary that links libnccl.so.2
// cannot even start on a node without NCCL, on the CPU, and a portable
// bundle carries no CUDA library. Built only where nccl.h was found.
//
// Contract:
//  - LoadNccl loads libnccl.so.<NCCL_MAJOR> from where every CUDA library
//    of the node is found (worker/backend/cuda/cuda_library_search.h:
//    LD_LIBRARY_PATH, the CUDA install, nvidia-nccl-cu13's
//    nvidia/nccl/lib) once per process; later calls return the same table,
//    or the same error.
//  - Unavailable when the library or one of its functions cannot be
//    found, naming it and every place looked in.
//  - Thread safety: LoadNccl may be called from any thread.

#ifndef TESSERA_WORKER_COLLECTIVE_NCCL_LIBRARY_H_
#define TESSERA_WORKER_COLLECTIVE_NCCL_LIBRARY_H_

#include <nccl.h>

#include "absl/status/statusor.h"

namespace tessera {

// The NCCL functions the all-reduce calls.
struct NcclApi {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclCommFinalize) comm_finalize = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetLastError) get_last_error = nullptr;
  int version = 0;  // ncclGetVersion's: 22809 for 2.28.9
};

absl::StatusOr<const NcclApi*> LoadNccl();

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_NCCL_LIBRARY_H_
