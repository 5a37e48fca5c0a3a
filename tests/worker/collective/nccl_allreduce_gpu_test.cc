// The NCCL path on a real GPU: a one-rank communicator's all-reduce (of
// host and device data) and its teardown. Skips where no GPU answers, or
// fails with TESSERA_REQUIRE_GPU=1 (tests/gpu_test_util.h).

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/collective/nccl_allreduce.h"

namespace tessera {
namespace {

TEST(NcclAllReduceGpuTest, OneRankReducesAndTearsDownPromptly) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
  if (!gpu.ok()) {
    TESSERA_NO_GPU() << "no GPU for NCCL: " << gpu.status().message();
  }
  if (!NcclBuilt()) {
    TESSERA_NO_GPU() << "this build has no NCCL (nccl.h was not found)";
  }
  absl::StatusOr<std::string> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const auto start = std::chrono::steady_clock::now();
  {
    absl::StatusOr<std::unique_ptr<NcclAllReduce>> nccl =
        NcclAllReduce::Create(0, 1, *id, 0, 10);
    ASSERT_TRUE(nccl.ok()) << nccl.status();
    // One rank: the sum is the data itself, host and device alike.
    std::vector<float> host = {1.5f, -2.0f, 3.25f};
    ASSERT_TRUE((*nccl)->AllReduceHost(absl::MakeSpan(host)).ok());
    EXPECT_EQ(host, std::vector<float>({1.5f, -2.0f, 3.25f}));
    DeviceArray<float> device(gpu->get(), 3);
    (*gpu)->CopyToDevice(host.data(), device.data(), 3 * sizeof(float));
    ASSERT_TRUE((*gpu)->Synchronize().ok());
    ASSERT_TRUE((*nccl)->AllReduce(absl::MakeSpan(device.data(), 3)).ok());
    std::vector<float> back(3);
    (*gpu)->CopyToHost(device.data(), back.data(), 3 * sizeof(float));
    ASSERT_TRUE((*gpu)->Synchronize().ok());
    EXPECT_EQ(back, host);
  }  // finalize and destroy
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10))
      << "the communicator's teardown took the whole deadline";
}

}  // namespace
}  // namespace tessera
