// Where the node's CUDA libraries (cuBLAS, NCCL) are found. No Tessera
// binary links them: each is opened with dlopen when it is first needed,
// so that a binary starts on a node without them (on the CPU) and a
// portable bundle carries none of them. One rule for all of them, so that
// cuBLAS and NCCL are found in the same places.
//
// Contract:
//  - OpenCudaLibrary asks the dynamic linker first, by soname
//    (LD_LIBRARY_PATH, the binary's RUNPATH, ld.so.cache, the system
//    folders), then tries CudaLibraryFolders in order, taking the first
//    folder that holds the file. It opens the library's `needs` from that
//    folder first, so that a folder the linker does not know works too.
//  - Unavailable when no place has it, naming the library, what the
//    dynamic linker said, every folder tried, the pip package, and any
//    other major version of it found there (libcublas.so.12 beside a
//    build that needs libcublas.so.13: CUDA 12 wheels, common with torch),
//    so that --device=auto says why it trains on the CPU.
//  - The handle is never closed: the library's objects may live until the
//    process ends.
//  - Thread safety: both functions may be called from any thread; callers
//    open each library once (a function-local static).

#ifndef TESSERA_WORKER_BACKEND_CUDA_CUDA_LIBRARY_SEARCH_H_
#define TESSERA_WORKER_BACKEND_CUDA_CUDA_LIBRARY_SEARCH_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

struct CudaLibrary {
  std::string soname;  // "libnccl.so.2"
  std::string what;    // "NCCL", for messages
  // Libraries of the same folder it needs, opened from there before it
  // ("libcublasLt.so.13" for cuBLAS).
  std::vector<std::string> needs;
  // Folders below a Python site-packages where NVIDIA's wheels put it
  // ("nvidia/nccl/lib" for nvidia-nccl-cu13, "nvidia/cu13/lib" for CUDA 13's
  // nvidia-cublas).
  std::vector<std::string> wheel_dirs;
  // The pip package that brings it ("nvidia-nccl-cu13"), named when no
  // place has it.
  std::string pip_package;
};

// Reads one environment variable (null when unset): std::getenv, or a
// test's own.
using GetEnv = std::function<const char*(const char*)>;

// The folders tried after the dynamic linker, in order, without those
// that do not exist:
//   1. the CUDA install: $CUDA_HOME/lib64, $CUDA_PATH/lib64,
//      /usr/local/cuda/lib64, and the toolkit folder the build used;
//   2. NVIDIA's Python packages: <site-packages>/<wheel_dir> for the
//      site-packages (and dist-packages) under lib/ and lib64/ (where a
//      system pip on RHEL-family nodes puts platform wheels) of
//      $VIRTUAL_ENV, $CONDA_PREFIX, every folder of $PATH that holds a
//      python3 (<prefix>/bin/python3: a venv, conda or the system), the
//      venvs ~/.venv, ~/venv, ./.venv and ./venv, ~/.local, /opt/conda,
//      /usr/local and /usr; and the lib/ of a conda environment
//      ($CONDA_PREFIX, or any of those prefixes with a conda-meta/), where
//      conda-forge's packages put the libraries themselves.
std::vector<std::string> CudaLibraryFolders(const CudaLibrary& library,
                                            const GetEnv& getenv);

// Opens `library` as the contract above says, with std::getenv.
absl::StatusOr<void*> OpenCudaLibrary(const CudaLibrary& library);

// The same with the environment `getenv` (for tests).
absl::StatusOr<void*> OpenCudaLibrary(const CudaLibrary& library,
                                      const GetEnv& getenv);

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CUDA_CUDA_LIBRARY_SEARCH_H_
