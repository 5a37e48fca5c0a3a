// The node's CUDA libraries, found as the worker finds them
// (worker/backend/cuda/cuda_library_search.h): cuBLAS and NCCL load, and
// the file each came from is printed (gpu_check.sh shows it). Built only
// with CUDA; skips where they cannot load, or fails with
// TESSERA_REQUIRE_GPU=1 (tests/gpu_test_util.h).

#include <fstream>
#include <iostream>
#include <string>

#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "worker/backend/cuda/cublas_library.h"
#include "worker/collective/nccl_allreduce.h"

namespace tessera {
namespace {

// The file of the first mapping of this process whose path has `library`.
std::string MappedFile(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash != std::string::npos &&
        line.find(library, slash) != std::string::npos) {
      return line.substr(slash);
    }
  }
  return "";
}

TEST(CudaLibrariesGpuTest, CublasLoads) {
  absl::StatusOr<const CublasApi*> cublas = LoadCublas();
  if (!cublas.ok()) TESSERA_NO_GPU() << cublas.status().message();
  const std::string file = MappedFile("libcublas.so");
  EXPECT_FALSE(file.empty());
  std::cout << "cuBLAS: " << file << std::endl;
}

TEST(CudaLibrariesGpuTest, NcclLoads) {
  if (!NcclBuilt()) TESSERA_NO_GPU() << "this build has no NCCL";
  const absl::Status loaded = NcclLoadable();
  if (!loaded.ok()) TESSERA_NO_GPU() << loaded.message();
  const std::string file = MappedFile("libnccl.so");
  EXPECT_FALSE(file.empty());
  std::cout << "NCCL: " << file << std::endl;
}

}  // namespace
}  // namespace tessera
