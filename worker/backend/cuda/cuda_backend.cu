#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/cublas_library.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/cuda_backend_impl.cuh"
#include "worker/backend/cuda/cuda_core_kernels.cuh"
#include "worker/backend/cuda/cuda_error_rule.h"

#ifndef TESSERA_CUDA_ARCHS
#define TESSERA_CUDA_ARCHS "(unknown)"
#endif

namespace tessera {
namespace {

const char* CublasName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_(other)";
  }
}

// The CUDA runtime's error functions, for cuda_error_rule.h.
const CudaErrorApi& CudaRuntimeErrors() {
  static const CudaErrorApi api = {
      [] { return static_cast<int>(cudaGetLastError()); },
      [](int e) { return cudaGetErrorName(static_cast<cudaError_t>(e)); },
      [](int e) { return cudaGetErrorString(static_cast<cudaError_t>(e)); }};
  return api;
}

}  // namespace

absl::Status CudaBackend::Init() {
  Check(cudaSetDevice(ordinal_), "cudaSetDevice");
  // A GPU older than every architecture this build has code for (and
  // older than its PTX) answers every call but cannot launch a kernel:
  // refuse it here, so --device=auto falls back to the CPU and an
  // explicit --device=cuda:N stops at start-up with the reason.
  if (status_.ok()) {
    const cudaError_t image = KernelImageError();
    if (image != cudaSuccess) {
      cudaGetLastError();  // clear it, so no later call is blamed
      status_ = absl::UnavailableError(absl::StrCat(
          name_, " cannot run this build's kernels (", cudaGetErrorName(image),
          "): the build has code for CUDA "
          "architectures ",
          TESSERA_CUDA_ARCHS,
          " only; rebuild with "
          "-DCMAKE_CUDA_ARCHITECTURES=<this GPU's> or use --device=cpu"));
    }
  }
  Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
        "cudaStreamCreate");
  if (status_.ok()) {
    // cuBLAS is loaded only now, by a process that computes on a GPU
    // (cublas_library.h says why).
    absl::StatusOr<const CublasApi*> api = LoadCublas();
    if (api.ok()) {
      cublas_ = *api;
    } else {
      status_ = absl::UnavailableError(
          absl::StrCat(name_, ": ", api.status().message()));
    }
  }
  if (status_.ok()) {
    CheckBlas(cublas_->create(&blas_), "cublasCreate");
  }
  if (status_.ok()) {
    CheckBlas(cublas_->set_stream(blas_, stream_), "cublasSetStream");
    // Plain FP32: the default math mode uses no TF32 tensor-op rounding,
    // so CPU and GPU agree to FP32 accumulation order.
    CheckBlas(cublas_->set_math_mode(blas_, CUBLAS_DEFAULT_MATH),
              "cublasSetMathMode");
  }
  Check(cudaStreamCreateWithFlags(&upload_stream_, cudaStreamNonBlocking),
        "cudaStreamCreate (uploads)");
  Check(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming),
        "cudaEventCreate (uploads)");
  Check(cudaEventCreateWithFlags(&released_, cudaEventDisableTiming),
        "cudaEventCreate (uploads)");
  for (Staging* s : {&upload_[0], &upload_[1], &download_[0], &download_[1]}) {
    if (!status_.ok()) break;
    Check(cudaHostAlloc(&s->host, kStagingBytes, cudaHostAllocDefault),
          "cudaHostAlloc (pinned staging buffer)");
    Check(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming),
          "cudaEventCreate");
  }
  return status_;
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(ordinal_);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (upload_stream_ != nullptr) cudaStreamSynchronize(upload_stream_);
  for (Staging* s : {&upload_[0], &upload_[1], &download_[0], &download_[1]}) {
    if (s->host != nullptr) cudaFreeHost(s->host);
    if (s->done != nullptr) cudaEventDestroy(s->done);
  }
  for (Scratch& s : scratch_) {
    if (s.ptr != nullptr) cudaFree(s.ptr);
  }
  if (blas_ != nullptr) cublas_->destroy(blas_);
  if (uploaded_ != nullptr) cudaEventDestroy(uploaded_);
  if (released_ != nullptr) cudaEventDestroy(released_);
  if (upload_stream_ != nullptr) cudaStreamDestroy(upload_stream_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// Every op starts here, so its launches are judged by their own errors
// (cuda_error_rule.h, rule 2).
bool CudaBackend::Ready() {
  if (!status_.ok()) return false;
  ClearStaleCudaError(CudaRuntimeErrors());
  return Check(cudaSetDevice(ordinal_), "cudaSetDevice");
}

// Clears the error it records (cuda_error_rule.h, rule 1): a fresh backend
// on this thread must not read it as its first launch's.
bool CudaBackend::Check(cudaError_t err, const char* what) {
  return RecordCudaResult(CudaRuntimeErrors(), static_cast<int>(err), name_,
                          what, &status_);
}

bool CudaBackend::CheckBlas(cublasStatus_t err, const char* what) {
  if (err == CUBLAS_STATUS_SUCCESS) return true;
  if (status_.ok()) {
    status_.Update(absl::InternalError(
        absl::StrCat(name_, ": ", what, " failed: ", CublasName(err))));
  }
  return false;
}

bool CudaBackend::FitsInt(const char* op,
                          std::initializer_list<int64_t> sizes) {
  for (int64_t v : sizes) {
    if (v > std::numeric_limits<int>::max()) {
      if (status_.ok()) {
        status_ = absl::InvalidArgumentError(
            absl::StrCat(name_, ": ", op, " of a dimension of ", v,
                         " is larger than cuBLAS's 32-bit sizes allow"));
      }
      return false;
    }
  }
  return true;
}

void* CudaBackend::ScratchBytes(ScratchSlot slot, int64_t bytes) {
  Scratch& s = scratch_[slot];
  if (s.bytes < bytes) {
    if (s.ptr != nullptr) {
      Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (scratch)");
      Check(cudaFree(s.ptr), "cudaFree (scratch)");
      s.ptr = nullptr;
      s.bytes = 0;
      if (slot == kOnes) ones_filled_ = 0;
    }
    if (!Check(cudaMalloc(&s.ptr, bytes), "cudaMalloc (scratch)")) {
      s.ptr = nullptr;
      return nullptr;
    }
    s.bytes = bytes;
  }
  return s.ptr;
}

bool CudaBackendBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Backend>> NewCudaBackend(int ordinal) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // no later launch on this thread is blamed
    return absl::UnavailableError(absl::StrCat(
        "no GPU answers: CUDA runtime says ", cudaGetErrorString(err)));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::UnavailableError(
        absl::StrCat("no GPU cuda:", ordinal, ": ", count,
                     " GPU(s) answer (ordinals count the GPUs that "
                     "CUDA_VISIBLE_DEVICES leaves visible)"));
  }
  // The start line names the device: model, memory, compute capability
  // and the driver's CUDA version.
  cudaDeviceProp prop;
  std::string name = absl::StrCat("cuda:", ordinal);
  if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    absl::StrAppend(&name, " (", prop.name, ", ", prop.totalGlobalMem >> 20,
                    " MiB, sm_", prop.major, prop.minor, ", driver CUDA ",
                    driver / 1000, ".", (driver % 1000) / 10, ")");
  }
  auto backend = std::make_unique<CudaBackend>(ordinal, name);
  if (absl::Status s = backend->Init(); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace tessera
