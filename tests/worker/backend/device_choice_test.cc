#include "worker/backend/device_choice.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/backend/cuda/cuda_backend.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using Kind = DeviceRequest::Kind;

TEST(ParseDeviceFlagTest, AcceptsTheFourForms) {
  EXPECT_EQ(ParseDeviceFlag("auto")->kind, Kind::kAuto);
  EXPECT_EQ(ParseDeviceFlag("cpu")->kind, Kind::kCpu);
  EXPECT_EQ(ParseDeviceFlag("cuda")->kind, Kind::kCuda);
  EXPECT_EQ(ParseDeviceFlag("cuda")->ordinal, 0);
  EXPECT_EQ(ParseDeviceFlag("cuda:0")->ordinal, 0);
  EXPECT_EQ(ParseDeviceFlag("cuda:3")->ordinal, 3);
  EXPECT_EQ(ParseDeviceFlag("cuda:12")->ordinal, 12);
}

TEST(ParseDeviceFlagTest, RejectsOthersQuotingTheFlag) {
  for (const char* bad : {"", "gpu", "CPU", "cuda:", "cuda:-1", "cuda:+1",
                          "cuda:1x", "cuda1", "cuda:0,1", "cuda:99999999999"}) {
    absl::StatusOr<DeviceRequest> r = ParseDeviceFlag(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(),
                HasSubstr(std::string("got \"") + bad + "\""));
  }
}

GpuProbe TwoGpus() {
  return GpuProbe{2, "cuda:0 NVIDIA H100, cuda:1 NVIDIA H100"};
}
GpuProbe NoGpu() { return GpuProbe{0, "CUDA runtime: no CUDA-capable device"}; }

TEST(ChooseDeviceTest, CpuIsAlwaysTheCpu) {
  absl::StatusOr<DeviceChoice> c =
      ChooseDevice({Kind::kCpu, 0}, TwoGpus(), true, "0,1");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->cuda);
  EXPECT_EQ(c->device, "cpu");
  EXPECT_THAT(c->reason, HasSubstr("--device=cpu"));
}

TEST(ChooseDeviceTest, AutoTakesTheFirstVisibleGpuAndSaysWhy) {
  absl::StatusOr<DeviceChoice> c =
      ChooseDevice({Kind::kAuto, 0}, TwoGpus(), true, "2,3");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->cuda);
  EXPECT_EQ(c->ordinal, 0);
  EXPECT_EQ(c->device, "cuda:0");
  EXPECT_THAT(c->reason, HasSubstr("auto"));
  EXPECT_THAT(c->reason, HasSubstr("2 GPU(s) answer"));
  EXPECT_THAT(c->reason, HasSubstr("NVIDIA H100"));
  EXPECT_THAT(c->reason, HasSubstr("CUDA_VISIBLE_DEVICES=\"2,3\""));
}

// Workers of one host each take the GPU of their local rank, sharing only
// when there are more workers than GPUs.
TEST(ChooseDeviceTest, AutoTakesTheGpuOfTheLocalRank) {
  for (int rank : {0, 1, 2, 3}) {
    absl::StatusOr<DeviceChoice> c =
        ChooseDevice({Kind::kAuto, 0}, TwoGpus(), true, nullptr, rank);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->ordinal, rank % 2);
    EXPECT_THAT(c->reason, HasSubstr(absl::StrCat("local rank ", rank)));
    if (rank >= 2) EXPECT_THAT(c->reason, HasSubstr("shared"));
  }
  // An explicit ordinal is kept whatever the rank.
  absl::StatusOr<DeviceChoice> c =
      ChooseDevice({Kind::kCuda, 0}, TwoGpus(), true, nullptr, 1);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ordinal, 0);
}

TEST(ChooseDeviceTest, LocalRankComesFromTesseraLocalOrSlurm) {
  unsetenv("TESSERA_LOCAL_RANK");
  unsetenv("SLURM_LOCALID");
  EXPECT_EQ(LocalRankFromEnvironment(), -1);
  setenv("SLURM_LOCALID", "3", 1);
  EXPECT_EQ(LocalRankFromEnvironment(), 3);
  setenv("TESSERA_LOCAL_RANK", "1", 1);
  EXPECT_EQ(LocalRankFromEnvironment(), 1);
  setenv("TESSERA_LOCAL_RANK", "x", 1);
  EXPECT_EQ(LocalRankFromEnvironment(), 3);
  unsetenv("TESSERA_LOCAL_RANK");
  unsetenv("SLURM_LOCALID");
}

TEST(ChooseDeviceTest, AutoTakesTheCpuWhenNoGpuAnswers) {
  absl::StatusOr<DeviceChoice> c =
      ChooseDevice({Kind::kAuto, 0}, NoGpu(), true, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->cuda);
  EXPECT_EQ(c->device, "cpu");
  EXPECT_THAT(c->reason, HasSubstr("no GPU answers"));
  EXPECT_THAT(c->reason, HasSubstr("no CUDA-capable device"));
  EXPECT_THAT(c->reason, HasSubstr("CUDA_VISIBLE_DEVICES unset"));
}

TEST(ChooseDeviceTest, AutoQuotesAnEmptyCudaVisibleDevices) {
  absl::StatusOr<DeviceChoice> c =
      ChooseDevice({Kind::kAuto, 0}, NoGpu(), true, "");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->device, "cpu");
  EXPECT_THAT(c->reason, HasSubstr("CUDA_VISIBLE_DEVICES=\"\""));
}

TEST(ChooseDeviceTest, AutoTakesTheCpuInABuildWithoutCuda) {
  absl::StatusOr<DeviceChoice> c =
      ChooseDevice({Kind::kAuto, 0}, TwoGpus(), false, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->device, "cpu");
  EXPECT_THAT(c->reason, HasSubstr("no CUDA backend"));
}

TEST(ChooseDeviceTest, ExplicitCudaOrdinal) {
  absl::StatusOr<DeviceChoice> c =
      ChooseDevice({Kind::kCuda, 1}, TwoGpus(), true, "4,5");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->cuda);
  EXPECT_EQ(c->ordinal, 1);
  EXPECT_EQ(c->device, "cuda:1");
  EXPECT_THAT(c->reason, HasSubstr("--device=cuda:1"));
}

TEST(ChooseDeviceTest, ExplicitCudaNeverFallsBackToTheCpu) {
  absl::StatusOr<DeviceChoice> c =
      ChooseDevice({Kind::kCuda, 2}, TwoGpus(), true, "0,1");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--device=cuda:2"));
  EXPECT_THAT(c.status().message(), HasSubstr("only 2 GPU(s) answer"));
  EXPECT_THAT(c.status().message(), HasSubstr("CUDA_VISIBLE_DEVICES=\"0,1\""));

  c = ChooseDevice({Kind::kCuda, 0}, NoGpu(), true, "-1");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(c.status().message(), HasSubstr("no GPU answers"));
  EXPECT_THAT(c.status().message(), HasSubstr("CUDA_VISIBLE_DEVICES=\"-1\""));

  c = ChooseDevice({Kind::kCuda, 0}, TwoGpus(), false, nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("no CUDA backend"));
}

TEST(ChooseDeviceForFlagTest, CpuMakesTheCpuBackend) {
  absl::StatusOr<DeviceChoice> c = ChooseDeviceForFlag("cpu");
  ASSERT_TRUE(c.ok());
  absl::StatusOr<std::unique_ptr<Backend>> b = MakeBackend(*c);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->device_name(), "cpu");
}

TEST(ChooseDeviceForFlagTest, AutoAlwaysGivesAWorkingBackend) {
  // Whatever this machine has: a GPU (and a CUDA build) or not.
  absl::StatusOr<DeviceChoice> c = ChooseDeviceForFlag("auto");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->reason.empty());
  if (!CudaBackendBuilt()) EXPECT_FALSE(c->cuda);
  if (!c->cuda) {
    EXPECT_EQ((*MakeBackend(*c))->device_name(), "cpu");
  }
}

// What auto chose runs ops, whatever this machine has: a GPU that cannot
// run this build's kernels must be refused when its backend is made (so
// the worker falls back to the CPU), never accepted and then fail every
// step. The CPU (here, or after that fall-back) runs them too.
TEST(ChooseDeviceForFlagTest, AutoRunsAnOpOnWhatItChose) {
  absl::StatusOr<DeviceChoice> c = ChooseDeviceForFlag("auto");
  ASSERT_TRUE(c.ok());
  absl::StatusOr<std::unique_ptr<Backend>> b = MakeBackend(*c);
  if (!b.ok()) {
    ASSERT_TRUE(c->cuda) << "the CPU backend failed: " << b.status();
    c->cuda = false;
    c->device = "cpu";
    b = MakeBackend(*c);
  }
  ASSERT_TRUE(b.ok()) << b.status();
  Backend* backend = b->get();
  EXPECT_THAT(backend->device_name(), ::testing::StartsWith(c->device));
  const std::vector<float> a = {1, 2, 3, 4}, m = {0.5f, -1, 2, 0};
  DeviceArray<float> da(backend, 4), dm(backend, 4), dc(backend, 4);
  backend->CopyToDevice(a.data(), da.data(), 4 * sizeof(float));
  backend->CopyToDevice(m.data(), dm.data(), 4 * sizeof(float));
  backend->Gemm(false, false, 2, 2, 2, 1.0f, da.data(), dm.data(), 0.0f,
                dc.data());
  backend->Relu(4, dc.data());
  std::vector<float> c_host(4, -7.0f);
  backend->CopyToHost(dc.data(), c_host.data(), 4 * sizeof(float));
  ASSERT_TRUE(backend->Synchronize().ok()) << backend->device_name();
  // [[1,2],[3,4]] x [[0.5,-1],[2,0]] = [[4.5,-1],[9.5,-3]], then ReLU.
  EXPECT_EQ(c_host, std::vector<float>({4.5f, 0.0f, 9.5f, 0.0f}));
}

TEST(ChooseDeviceForFlagTest, BadFlagIsInvalidArgument) {
  EXPECT_EQ(ChooseDeviceForFlag("tpu").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
