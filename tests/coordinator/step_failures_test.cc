#include "coordinator/step_failures.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(StepFailuresTest, OnlyUnavailableOrDeadlineExceededIsRetried) {
  QueuedStep p;
  p.request.set_step(7);
  EXPECT_FALSE(RetryPause(0, absl::InternalError("bad"), absl::Minutes(1), &p)
                   .has_value());
  EXPECT_TRUE(
      RetryPause(0, absl::UnavailableError("no server"), absl::Minutes(1), &p)
          .has_value());
  EXPECT_TRUE(
      RetryPause(0, absl::DeadlineExceededError("slow"), absl::Minutes(1), &p)
          .has_value());
  EXPECT_NE(p.first_failure, absl::InfiniteFuture());
}

TEST(StepFailuresTest, NoRetryPastTheTimeoutSinceTheFirstFailure) {
  QueuedStep p;
  p.first_failure = absl::Now() - absl::Minutes(2);
  EXPECT_FALSE(
      RetryPause(0, absl::UnavailableError("no server"), absl::Minutes(1), &p)
          .has_value());
  QueuedStep fresh;
  EXPECT_FALSE(RetryPause(0, absl::UnavailableError("no server"),
                          absl::ZeroDuration(), &fresh)
                   .has_value());
}

TEST(StepFailuresTest, ErrorsNameTheStepAndWorker) {
  const absl::Status cancelled = CancelledAfterError(12);
  EXPECT_TRUE(absl::IsCancelled(cancelled));
  EXPECT_EQ(cancelled.message(), "step 12 cancelled after an earlier error");
  const absl::Status lost =
      ReplicaLostError(5, 1, absl::UnavailableError("gone"));
  EXPECT_TRUE(absl::IsAborted(lost));
  EXPECT_TRUE(absl::StartsWith(lost.message(),
                               "step 5 failed on worker 1 (gone): its replica "
                               "missed a step the others made"));
}

}  // namespace
}  // namespace tessera
