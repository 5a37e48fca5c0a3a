#include "common/rpc/backoff.h"

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(BackoffTest, PausesGrowToTheLongest) {
  Backoff backoff;
  EXPECT_EQ(backoff.Next(), kBackoffInitial);
  EXPECT_EQ(backoff.Next(), kBackoffInitial * kBackoffMultiplier);
  for (int i = 0; i < 20; ++i) backoff.Next();
  EXPECT_EQ(backoff.Next(), kBackoffMax);
}

TEST(BackoffTest, TransientMeansThePeerMayComeBack) {
  EXPECT_TRUE(IsTransient(absl::UnavailableError("Socket closed")));
  EXPECT_TRUE(IsTransient(absl::DeadlineExceededError("no answer")));
  EXPECT_FALSE(IsTransient(absl::OkStatus()));
  EXPECT_FALSE(IsTransient(absl::InvalidArgumentError("bad model")));
  EXPECT_FALSE(IsTransient(absl::FailedPreconditionError("not configured")));
}

// A worker killed while it is configured answers UNAVAILABLE until the
// launcher has restarted it; then the same call succeeds.
TEST(BackoffTest, RetryTransientUntilRepeatsUntilThePeerAnswers) {
  int attempts = 0;
  absl::Status s = RetryTransientUntil(absl::Now() + absl::Minutes(1), [&] {
    return ++attempts < 3 ? absl::UnavailableError("Socket closed")
                          : absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(attempts, 3);
}

TEST(BackoffTest, RetryTransientUntilEndsAtThePeersOwnAnswer) {
  int attempts = 0;
  absl::Status s = RetryTransientUntil(absl::Now() + absl::Minutes(1), [&] {
    return ++attempts < 2 ? absl::UnavailableError("Socket closed")
                          : absl::InvalidArgumentError("bad model");
  });
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(attempts, 2);
}

TEST(BackoffTest, RetryTransientUntilGivesUpAtTheDeadline) {
  int attempts = 0;
  absl::Status s = RetryTransientUntil(absl::Now(), [&] {
    ++attempts;
    return absl::UnavailableError("gone");
  });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(attempts, 1);
}

}  // namespace
}  // namespace tessera
