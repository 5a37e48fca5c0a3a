#include "worker/collective/nccl_library.h"

#include <dlfcn.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/cuda_library_search.h"

namespace tessera {
namespace {

template <typename F>
void Resolve(void* library, const char* symbol, F* out, std::string* error) {
  *out = reinterpret_cast<F>(dlsym(library, symbol));
  if (*out == nullptr && error->empty()) {
    const char* why = dlerror();
    *error = absl::StrCat("NCCL has no ", symbol, ": ",
                          why != nullptr ? why : "(no reason given)");
  }
}

absl::StatusOr<NcclApi> Load() {
  const std::string name = absl::StrCat("libnccl.so.", NCCL_MAJOR);
  absl::StatusOr<void*> opened = OpenCudaLibrary(
      {name, "NCCL", {}, {"nvidia/nccl/lib"}, "nvidia-nccl-cu13"});
  if (!opened.ok()) return opened.status();
  NcclApi api;
  std::string error;
  Resolve(*opened, "ncclGetVersion", &api.get_version, &error);
  Resolve(*opened, "ncclGetUniqueId", &api.get_unique_id, &error);
  Resolve(*opened, "ncclCommInitRankConfig", &api.comm_init_rank_config,
          &error);
  Resolve(*opened, "ncclCommGetAsyncError", &api.comm_get_async_error, &error);
  Resolve(*opened, "ncclCommFinalize", &api.comm_finalize, &error);
  Resolve(*opened, "ncclCommDestroy", &api.comm_destroy, &error);
  Resolve(*opened, "ncclCommAbort", &api.comm_abort, &error);
  Resolve(*opened, "ncclAllReduce", &api.all_reduce, &error);
  Resolve(*opened, "ncclGetErrorString", &api.get_error_string, &error);
  Resolve(*opened, "ncclGetLastError", &api.get_last_error, &error);
  if (!error.empty()) {
    return absl::UnavailableError(absl::StrCat(name, ": ", error));
  }
  if (api.get_version(&api.version) != ncclSuccess) {
    return absl::UnavailableError(
        absl::StrCat(name, ": ncclGetVersion failed"));
  }
  return api;
}

}  // namespace

absl::StatusOr<const NcclApi*> LoadNccl() {
  // A function-local static: loaded once, by the first caller, safely
  // against concurrent first calls.
  static const absl::StatusOr<NcclApi>* const loaded =
      new absl::StatusOr<NcclApi>(Load());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

}  // namespace tessera
