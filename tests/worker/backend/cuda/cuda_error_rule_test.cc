// The CUDA runtime's per-thread last error, as the CUDA backend treats it
// (worker/backend/cuda/cuda_error_rule.h), against a fake runtime that
// keeps one the way CUDA does: runs in every build, without a GPU.

#include "worker/backend/cuda/cuda_error_rule.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;      // cudaErrorInvalidValue
constexpr int kMemoryAllocation = 2;  // cudaErrorMemoryAllocation
constexpr int kIllegalAddress = 700;  // cudaErrorIllegalAddress: sticky

// CUDA's behaviour: a failed call sets the thread's last error;
// cudaGetLastError returns and clears it, except a sticky error, which
// every later call returns again.
thread_local int last_error = kSuccess;
thread_local bool sticky = false;

int GetLastError() {
  const int e = last_error;
  if (!sticky) last_error = kSuccess;
  return e;
}
const char* Name(int e) {
  switch (e) {
    case kInvalidValue:
      return "cudaErrorInvalidValue";
    case kMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case kIllegalAddress:
      return "cudaErrorIllegalAddress";
    default:
      return "cudaErrorUnknown";
  }
}
const char* Describe(int) { return "fake"; }
const CudaErrorApi kFake = {GetLastError, Name, Describe};

int Fail(int error) {
  last_error = error;
  return error;
}

// A CPU twin of CudaBackend's use of the rules: Check as cuda_backend.cu's,
// an op that starts with Ready and checks a launch the way
// cuda_core_kernels.cu's do (the launch's error is cudaGetLastError()).
class TwinBackend {
 public:
  explicit TwinBackend(std::string name) : name_(std::move(name)) {}

  bool Check(int err, const char* what) {
    return RecordCudaResult(kFake, err, name_, what, &status_);
  }
  bool Ready() {
    if (!status_.ok()) return false;
    ClearStaleCudaError(kFake);
    return true;
  }
  // cudaMalloc: fails for more than 80 GB.
  void Allocate(long long bytes) {
    if (!Ready()) return;
    Check(bytes > (80LL << 30) ? Fail(kMemoryAllocation) : kSuccess,
          "cudaMalloc");
  }
  // A kernel launch, which reports only through the last error.
  void Fill(bool launch_fails = false) {
    if (!Ready()) return;
    if (launch_fails) Fail(kInvalidValue);
    const int launch = GetLastError();
    Check(launch, "launch of the Fill kernel");
  }
  const absl::Status& status() const { return status_; }

 private:
  const std::string name_;
  absl::Status status_;
};

class CudaErrorRuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    last_error = kSuccess;
    sticky = false;
  }
};

// gpu_test's order: a test asks for 1 EiB on purpose, a fresh backend is
// made, and the next test's first launch must not fail with the stale
// cudaErrorMemoryAllocation.
TEST_F(CudaErrorRuleTest, AFailedCallIsNotBlamedOnAFreshBackendsLaunch) {
  TwinBackend first("cuda:0");
  first.Allocate(1LL << 60);
  ASSERT_FALSE(first.status().ok());
  EXPECT_THAT(std::string(first.status().message()),
              HasSubstr("cudaMalloc failed: cudaErrorMemoryAllocation"));
  EXPECT_EQ(last_error, kSuccess) << "the recorded error was not cleared";

  TwinBackend fresh("cuda:0");
  fresh.Fill();
  EXPECT_TRUE(fresh.status().ok()) << fresh.status();
}

// A call whose failure nobody recorded (a destructor's cudaFree, a
// cudaGetDeviceProperties that is only used when it works) leaves an
// error behind: the next op's launch is still judged by its own error.
TEST_F(CudaErrorRuleTest, ALaunchIsJudgedByItsOwnErrorOnly) {
  Fail(kInvalidValue);  // unrecorded
  TwinBackend backend("cuda:0");
  backend.Fill();
  EXPECT_TRUE(backend.status().ok()) << backend.status();
}

TEST_F(CudaErrorRuleTest, ALaunchThatFailsIsReportedNamingIt) {
  TwinBackend backend("cuda:1");
  backend.Fill(/*launch_fails=*/true);
  EXPECT_EQ(backend.status().message(),
            "cuda:1: launch of the Fill kernel failed: "
            "cudaErrorInvalidValue (fake)");
}

// Clearing cannot hide a kernel fault: a sticky error comes back from the
// next launch, and the first error recorded is the one reported.
TEST_F(CudaErrorRuleTest, AStickyErrorIsNotLostByClearing) {
  TwinBackend backend("cuda:0");
  Fail(kIllegalAddress);
  sticky = true;
  backend.Fill();
  EXPECT_THAT(std::string(backend.status().message()),
              HasSubstr("cudaErrorIllegalAddress"));
  backend.Allocate(1LL << 60);
  EXPECT_THAT(std::string(backend.status().message()),
              HasSubstr("cudaErrorIllegalAddress"));
}

}  // namespace
}  // namespace tessera
