#include "ps_server/sync_aggregator.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using Outcome = SyncAggregator::Outcome;

TEST(SyncAggregator, ReleasesTheAverageOnceAllHaveArrived) {
  SyncAggregator agg(2);
  std::vector<float> avg;
  EXPECT_EQ(*agg.Add(0, 3, {1, 2}, &avg), Outcome::kAccumulated);
  EXPECT_EQ(*agg.Add(0, 3, {2, 4}, &avg), Outcome::kAccumulated);
  EXPECT_TRUE(avg.empty());
  EXPECT_EQ(*agg.Add(0, 3, {6, 0}, &avg), Outcome::kReleased);
  EXPECT_THAT(avg, ElementsAre(3.0f, 2.0f));
  EXPECT_EQ(agg.released_step(), 0);
  EXPECT_EQ(agg.dropped(), 0);
}

TEST(SyncAggregator, BackupWorkersGradientsArriveLateAndAreDropped) {
  // Three workers, one backup: the step is released after two.
  SyncAggregator agg(1);
  std::vector<float> avg;
  EXPECT_EQ(*agg.Add(5, 2, {1}, &avg), Outcome::kAccumulated);
  EXPECT_EQ(*agg.Add(5, 2, {3}, &avg), Outcome::kReleased);
  EXPECT_THAT(avg, ElementsAre(2.0f));
  EXPECT_EQ(*agg.Add(5, 2, {100}, &avg), Outcome::kLate);
  EXPECT_EQ(agg.dropped(), 1);
  // The next step starts afresh.
  EXPECT_EQ(*agg.Add(6, 2, {10}, &avg), Outcome::kAccumulated);
  EXPECT_EQ(*agg.Add(6, 2, {20}, &avg), Outcome::kReleased);
  EXPECT_THAT(avg, ElementsAre(15.0f));
}

TEST(SyncAggregator, ANewerStepDropsAnUnfinishedOne) {
  SyncAggregator agg(1);
  std::vector<float> avg;
  EXPECT_EQ(*agg.Add(1, 2, {1}, &avg), Outcome::kAccumulated);
  EXPECT_EQ(*agg.Add(2, 2, {5}, &avg), Outcome::kAccumulated);
  EXPECT_EQ(agg.dropped(), 1);
  EXPECT_EQ(*agg.Add(1, 2, {1}, &avg), Outcome::kLate);
  EXPECT_EQ(*agg.Add(2, 2, {7}, &avg), Outcome::kReleased);
  EXPECT_THAT(avg, ElementsAre(6.0f));
}

TEST(SyncAggregator, RejectsBadPushesWithoutChangingState) {
  SyncAggregator agg(2);
  std::vector<float> avg;
  EXPECT_FALSE(agg.Add(0, 2, {1}, &avg).ok());
  EXPECT_FALSE(agg.Add(0, 0, {1, 1}, &avg).ok());
  EXPECT_EQ(*agg.Add(0, 2, {1, 1}, &avg), Outcome::kAccumulated);
  absl::StatusOr<Outcome> bad = agg.Add(0, 3, {1, 1}, &avg);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("needs 3"));
  EXPECT_EQ(*agg.Add(0, 2, {3, 3}, &avg), Outcome::kReleased);
  EXPECT_THAT(avg, ElementsAre(2.0f, 2.0f));
}

TEST(SyncAggregator, ConcurrentPushesReleaseExactlyOnce) {
  constexpr int kWorkers = 8;
  constexpr int kSteps = 200;
  SyncAggregator agg(16);
  std::atomic<int> released{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<float> grad(16, float(w)), avg;
      for (int s = 0; s < kSteps; ++s) {
        // Everyone pushes every step; workers run ahead freely, so some
        // steps are overtaken, and each step is released at most once.
        if (*agg.Add(s, kWorkers, grad, &avg) == Outcome::kReleased) {
          ++released;
          EXPECT_FLOAT_EQ(avg[0], 3.5f);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GE(released.load(), 1);
  EXPECT_EQ(released.load() * kWorkers + agg.dropped(), kWorkers * kSteps);
}

TEST(SyncAggregator, AfterResetEarlierStepsAreNoLongerLate) {
  SyncAggregator agg(2);
  std::vector<float> avg;
  ASSERT_EQ(*agg.Add(7, 1, {1, 1}, &avg), Outcome::kReleased);
  EXPECT_EQ(*agg.Add(3, 1, {1, 1}, &avg), Outcome::kLate);
  ASSERT_EQ(*agg.Add(8, 2, {5, 5}, &avg), Outcome::kAccumulated);
  // A restore rewinds the job to step 3: the half-gathered step 8 is
  // forgotten and step 3 is taken again.
  agg.Reset();
  EXPECT_EQ(agg.released_step(), -1);
  ASSERT_EQ(*agg.Add(3, 2, {1, 1}, &avg), Outcome::kAccumulated);
  ASSERT_EQ(*agg.Add(3, 2, {3, 3}, &avg), Outcome::kReleased);
  EXPECT_THAT(avg, ElementsAre(2.0f, 2.0f));
  EXPECT_EQ(agg.dropped(), 1);
}

}  // namespace
}  // namespace tessera
