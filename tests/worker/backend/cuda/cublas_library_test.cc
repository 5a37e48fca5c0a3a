// cuBLAS is loaded when a GPU backend is made, never at start-up
// (worker/backend/cuda/cublas_library.h: loading it costs a process about
// 150 MB of resident memory). Runs in every build and on any machine: with
// no GPU it checks that trying one loads nothing; with a GPU, that making a
// backend loads cuBLAS.

#include <fstream>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "worker/backend/cuda/cuda_backend.h"

namespace tessera {
namespace {

// Whether a mapping of this process names `library`.
bool Mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(library) != std::string::npos) return true;
  }
  return false;
}

TEST(CublasLibraryTest, LoadedOnlyWhenAGpuBackendIsMade) {
  const bool before = Mapped("libcublasLt");
  absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
  if (!gpu.ok()) {
    // No GPU: nothing may have loaded cuBLAS, neither start-up nor this.
    EXPECT_FALSE(Mapped("libcublasLt"))
        << "no GPU (" << gpu.status() << "), yet cuBLAS is loaded";
    return;
  }
  if (before) {
    GTEST_SKIP() << "an earlier test in this process made a GPU backend: "
                    "when cuBLAS was loaded cannot be told";
  }
  EXPECT_TRUE(Mapped("libcublasLt")) << "a GPU backend without cuBLAS";
}

}  // namespace
}  // namespace tessera
