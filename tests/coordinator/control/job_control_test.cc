#include "coordinator/control/job_control.h"

#include <thread>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kLong = absl::Seconds(30);

TEST(JobControlTest, StepsAreTakenOnceAndJoinWaitsForThem) {
  JobControl control;
  EXPECT_EQ(control.AddSteps(5), 5);
  EXPECT_EQ(control.AddSteps(3), 8);
  EXPECT_EQ(control.TakeSteps(), 8);
  EXPECT_EQ(control.TakeSteps(), 0);
  // Not done and not idle: Join times out.
  EXPECT_EQ(control.Join(absl::Milliseconds(20)).code(),
            absl::StatusCode::kDeadlineExceeded);
  std::thread loop([&] {
    control.StepsDone(8);
    control.WaitForWork();  // idle until stopped
  });
  EXPECT_TRUE(control.Join(kLong).ok());
  control.Stop("done");
  loop.join();
  EXPECT_TRUE(control.stop_requested());
  EXPECT_EQ(control.stop_reason(), "done");
}

TEST(JobControlTest, CheckpointReturnsThePathTheLoopWrote) {
  JobControl control;
  EXPECT_FALSE(control.checkpoint_wanted());
  std::thread loop([&] {
    control.WaitForWork();  // woken by the request
    ASSERT_TRUE(control.checkpoint_wanted());
    control.CheckpointWritten(std::string("/ckpt/ckpt-0000000042"));
  });
  absl::StatusOr<std::string> path = control.Checkpoint(kLong);
  loop.join();
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, "/ckpt/ckpt-0000000042");
  EXPECT_FALSE(control.checkpoint_wanted());
}

TEST(JobControlTest, FailedCheckpointAndEndedJobAreReported) {
  JobControl control;
  std::thread loop([&] {
    control.WaitForWork();
    control.CheckpointWritten(absl::FailedPreconditionError("no dir"));
  });
  EXPECT_THAT(control.Checkpoint(kLong).status().message(),
              HasSubstr("no dir"));
  loop.join();
  std::thread end([&] {
    absl::SleepFor(absl::Milliseconds(20));
    control.End(absl::InternalError("ps 0 lost"));
  });
  EXPECT_THAT(control.Checkpoint(kLong).status().message(),
              HasSubstr("ended before a checkpoint"));
  end.join();
  EXPECT_EQ(control.Join(kLong).code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace tessera
