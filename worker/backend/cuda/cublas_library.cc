#include "worker/backend/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/cuda_library_search.h"

namespace tessera {
namespace {

const char* DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "(no reason given)";
}

template <typename F>
bool Resolve(void* library, const char* symbol, F* out, std::string* error) {
  *out = reinterpret_cast<F>(dlsym(library, symbol));
  if (*out == nullptr && error->empty()) {
    *error = absl::StrCat("cuBLAS has no ", symbol, ": ", DlError());
  }
  return *out != nullptr;
}

absl::StatusOr<CublasApi> Load() {
  const std::string major = absl::StrCat(CUBLAS_VER_MAJOR);
  absl::StatusOr<void*> opened = OpenCudaLibrary(
      {absl::StrCat("libcublas.so.", major),
       "cuBLAS, which the CUDA "
       "backend needs",
       {absl::StrCat("libcublasLt.so.", major)},
       // CUDA 13's nvidia-cublas shares one folder with the other CUDA 13
       // wheels; CUDA 12's nvidia-cublas-cu12 has its own.
       {absl::StrCat("nvidia/cu", major, "/lib"), "nvidia/cublas/lib"},
       // CUDA 13's is plain nvidia-cublas; CUDA 12's had a suffix.
       major == "13" ? "nvidia-cublas"
                     : absl::StrCat("nvidia-cublas-cu", major)});
  if (!opened.ok()) return opened.status();
  void* library = *opened;
  const std::string name = absl::StrCat("libcublas.so.", major);
  CublasApi api;
  std::string error;
  Resolve(library, "cublasCreate_v2", &api.create, &error);
  Resolve(library, "cublasDestroy_v2", &api.destroy, &error);
  Resolve(library, "cublasSetStream_v2", &api.set_stream, &error);
  Resolve(library, "cublasSetMathMode", &api.set_math_mode, &error);
  Resolve(library, "cublasSgemm_v2", &api.sgemm, &error);
  Resolve(library, "cublasSgemmStridedBatched", &api.sgemm_strided_batched,
          &error);
  Resolve(library, "cublasSgemv_v2", &api.sgemv, &error);
  if (!error.empty()) {
    return absl::UnavailableError(absl::StrCat(name, ": ", error));
  }
  return api;
}

}  // namespace

absl::StatusOr<const CublasApi*> LoadCublas() {
  // A function-local static: loaded once, by the first caller, safely
  // against concurrent first calls.
  static const absl::StatusOr<CublasApi>* const loaded =
      new absl::StatusOr<CublasApi>(Load());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

}  // namespace tessera
