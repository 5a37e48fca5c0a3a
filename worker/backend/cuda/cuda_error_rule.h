// How the CUDA backend and the NCCL all-reduce treat the CUDA runtime's
// per-thread "last error". The runtime keeps one per host thread: a failed
// call sets it, cudaGetLastError returns and clears it, and a kernel
// launch reports its own failure only there. Two rules follow:
//  1. A failed call's error, once recorded, is cleared from the last error
//     at once. Otherwise the next launch checked on this thread reads it
//     as its own failure, in this backend or in a fresh one made after it
//     (the next GPU test after an impossible allocation, the next
//     benchmark job after an out-of-memory error).
//  2. Before an op launches, an error that some call left behind without
//     anyone recording it (a destructor's, a failure that was handled) is
//     cleared, so that a launch is judged by its own error only. A sticky
//     error (a kernel that faulted) is not lost by this: every later call
//     returns it again.
//
// Plain C++ over a small table of the runtime's functions, so the rules
// are tested without a GPU against a fake runtime
// (tests/worker/backend/cuda/cuda_error_rule_test.cc); cuda_backend.cu and
// nccl_allreduce.cu pass CUDA's.

#ifndef TESSERA_WORKER_BACKEND_CUDA_CUDA_ERROR_RULE_H_
#define TESSERA_WORKER_BACKEND_CUDA_CUDA_ERROR_RULE_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera {

// The runtime's error functions; an error is its cudaError_t as an int,
// 0 being cudaSuccess.
struct CudaErrorApi {
  int (*get_last_error)();           // cudaGetLastError: returns and clears
  const char* (*error_name)(int);    // cudaGetErrorName
  const char* (*error_string)(int);  // cudaGetErrorString
};

// Rule 1. True when `error` is success. Otherwise records "<device>:
// <what> failed: <name> (<description>)" in *status unless it holds an
// error already (the first failure is the one reported), clears the
// runtime's last error, and returns false.
inline bool RecordCudaResult(const CudaErrorApi& api, int error,
                             absl::string_view device, absl::string_view what,
                             absl::Status* status) {
  if (error == 0) return true;
  api.get_last_error();
  if (status->ok()) {
    *status = absl::InternalError(
        absl::StrCat(device, ": ", what, " failed: ", api.error_name(error),
                     " (", api.error_string(error), ")"));
  }
  return false;
}

// Rule 2, before an op's launches: drops a last error nobody recorded.
inline void ClearStaleCudaError(const CudaErrorApi& api) {
  api.get_last_error();
}

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CUDA_CUDA_ERROR_RULE_H_
