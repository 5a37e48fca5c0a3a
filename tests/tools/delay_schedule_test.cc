#include "tests/tools/delay_schedule.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(DelayScheduleTest, RejectsJitterLargerThanTheDelay) {
  EXPECT_FALSE(DelaySchedule::Create(100, 101, 1).ok());
  EXPECT_FALSE(DelaySchedule::Create(100, -1, 1).ok());
  EXPECT_TRUE(DelaySchedule::Create(100, 100, 1).ok());
}

TEST(DelayScheduleTest, WithoutJitterReleasesInArrivalOrderAfterTheDelay) {
  DelaySchedule s = *DelaySchedule::Create(1000, 0, 1);
  s.Add(7, 0);
  s.Add(8, 0);
  s.Add(9, 10);
  std::vector<uint32_t> ids;
  s.PopDue(999, &ids);
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(s.NextRelease(), 1000);
  s.PopDue(1000, &ids);
  EXPECT_EQ(ids, (std::vector<uint32_t>{7, 8}));
  s.PopDue(1010, &ids);
  EXPECT_EQ(ids, (std::vector<uint32_t>{7, 8, 9}));
  EXPECT_FALSE(s.NextRelease().has_value());
  EXPECT_EQ(s.stats().packets, 3);
  EXPECT_EQ(s.stats().min_us, 1000);
  EXPECT_EQ(s.stats().max_us, 1000);
  EXPECT_DOUBLE_EQ(s.stats().mean_us(), 1000.0);
}

// Every delay falls in [delay - jitter, delay + jitter], their mean is near
// the delay, and packets leave in order of release time: some overtake
// others, as under netem's jitter.
TEST(DelayScheduleTest, JitterIsUniformWithinItsBoundsAndReorders) {
  DelaySchedule s = *DelaySchedule::Create(1000, 250, 42);
  constexpr int kPackets = 20000;
  for (int i = 0; i < kPackets; ++i) s.Add(i, i);  // one a microsecond
  std::vector<uint32_t> ids;
  int64_t last_release = 0;
  while (std::optional<int64_t> next = s.NextRelease()) {
    ASSERT_GE(*next, last_release);
    last_release = *next;
    s.PopDue(*next, &ids);
  }
  ASSERT_EQ(ids.size(), kPackets);
  EXPECT_GE(s.stats().min_us, 750);
  EXPECT_LE(s.stats().max_us, 1250);
  EXPECT_LT(s.stats().min_us, 760);
  EXPECT_GT(s.stats().max_us, 1240);
  EXPECT_NEAR(s.stats().mean_us(), 1000.0, 5.0);
  int overtaken = 0;
  for (size_t i = 1; i < ids.size(); ++i) overtaken += ids[i] < ids[i - 1];
  EXPECT_GT(overtaken, kPackets / 10);
}

TEST(DelayScheduleTest, ReleaseAllLetsEverythingGoUncounted) {
  DelaySchedule s = *DelaySchedule::Create(1000, 0, 1);
  s.Add(1, 0);
  s.Add(2, 500);
  std::vector<uint32_t> ids;
  s.PopDue(1000, &ids);
  s.ReleaseAll(&ids);
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(s.stats().packets, 1);
  EXPECT_EQ(s.stats().released_early, 1);
  EXPECT_EQ(s.held(), 0u);
}

}  // namespace
}  // namespace tessera
