#include "worker/backend/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"

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
  const std::string name = absl::StrCat("libcublas.so.", CUBLAS_VER_MAJOR);
  // Never closed: cuBLAS handles may live until the process ends.
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = library == nullptr ? DlError() : "";
#ifdef TESSERA_CUDA_LIBRARY_DIR
  // Where the build found the toolkit, as a linked library's RUNPATH would
  // have said.
  if (library == nullptr) {
    library = dlopen(absl::StrCat(TESSERA_CUDA_LIBRARY_DIR, "/", name).c_str(),
                     RTLD_NOW | RTLD_LOCAL);
  }
#endif
  if (library == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load ", name,
                     " (cuBLAS, which the CUDA backend needs): ", why));
  }
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
