// Deadlines: SetDeadline and the --rpc_timeout_s check StartProcess makes.
#include "common/rpc/grpc_channel.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "gflags/gflags.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::system_clock;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Seconds from now to the deadline SetDeadline(`seconds`) gives.
double DeadlineIn(double seconds) {
  grpc::ClientContext context;
  const Clock::time_point before = Clock::now();
  SetDeadline(&context, seconds);
  return std::chrono::duration<double>(context.deadline() - before).count();
}

TEST(RpcTimeoutFlagTest, OnlyFiniteSecondsUpToTheMaximumPass) {
  EXPECT_TRUE(CheckTimeoutSeconds("--rpc_timeout_s", 120).ok());
  EXPECT_TRUE(CheckTimeoutSeconds("--rpc_timeout_s", 0.001).ok());
  EXPECT_TRUE(CheckTimeoutSeconds("--rpc_timeout_s", kMaxRpcTimeoutS).ok());
  for (double bad : {0.0, -1.0, kNaN, kInf, -kInf, 1e6 + 1, 9.3e9, 1e300}) {
    absl::Status s = CheckTimeoutSeconds("--rpc_timeout_s", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--rpc_timeout_s must be a number of "
                                       "seconds in (0, 1000000], got"))
        << bad;
  }
}

TEST(SetDeadlineTest, UsesTheGivenSecondsOrTheDefaultForNaN) {
  EXPECT_NEAR(DeadlineIn(30), 30, 5);
  EXPECT_NEAR(DeadlineIn(kNaN), kDefaultRpcTimeoutS, 5);
}

// seconds * 1e6 beyond int64 was undefined behaviour (on x86 a deadline far
// in the past); tessera_ctl passes --wait_s + 10 unchecked.
TEST(SetDeadlineTest, HugeSecondsAreClampedToTheMaximum) {
  for (double huge : {kMaxRpcTimeoutS, 9.3e9, 1e300, kInf}) {
    EXPECT_NEAR(DeadlineIn(huge), kMaxRpcTimeoutS, 5) << huge;
  }
}

TEST(SetDeadlineTest, SecondsThatAreNotPositiveGiveADeadlineAlreadyPast) {
  for (double bad : {0.0, -5.0}) {
    EXPECT_LE(DeadlineIn(bad), 0.5) << bad;
    EXPECT_GE(DeadlineIn(bad), -0.5) << bad;
  }
}

}  // namespace
}  // namespace tessera
