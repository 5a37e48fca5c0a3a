// The event pool's order of service (common/data_plane/ready_queues.h):
// small requests ahead of large ones, large ones never starved.

#include "common/data_plane/ready_queues.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace tessera {
namespace ready_queues_test {

std::vector<std::string> TakeAll(ReadyQueues<std::string>& queues) {
  std::vector<std::string> order;
  for (std::optional<std::string> next = queues.Take(); next.has_value();
       next = queues.Take()) {
    order.push_back(*next);
  }
  return order;
}

TEST(ReadyQueuesTest, EmptyGivesNothing) {
  ReadyQueues<std::string> queues(4);
  EXPECT_FALSE(queues.Take().has_value());
}

TEST(ReadyQueuesTest, SmallIsTakenBeforeLargeQueuedEarlier) {
  ReadyQueues<std::string> queues(4);
  queues.Push("L1", /*small=*/false);
  queues.Push("L2", /*small=*/false);
  queues.Push("S1", /*small=*/true);
  queues.Push("S2", /*small=*/true);
  EXPECT_EQ(TakeAll(queues),
            (std::vector<std::string>{"S1", "S2", "L1", "L2"}));
}

TEST(ReadyQueuesTest, LargeIsTakenAfterSmallPerLargeInARow) {
  ReadyQueues<std::string> queues(2);
  queues.Push("L1", false);
  queues.Push("L2", false);
  for (int i = 1; i <= 5; ++i) queues.Push("S" + std::to_string(i), true);
  EXPECT_EQ(TakeAll(queues), (std::vector<std::string>{"S1", "S2", "L1", "S3",
                                                       "S4", "L2", "S5"}));
}

// Small items keep arriving, one more after every take: each large one is
// still taken within small_per_large + 1 takes of the one before.
TEST(ReadyQueuesTest, EndlessSmallItemsDoNotStarveLargeOnes) {
  constexpr int kSmallPerLarge = 3;
  ReadyQueues<std::string> queues(kSmallPerLarge);
  for (int i = 0; i < 10; ++i) queues.Push("L", false);
  for (int i = 0; i < 4; ++i) queues.Push("S", true);
  int large_taken = 0;
  int since_large = 0;
  for (int take = 0; take < 100 && large_taken < 10; ++take) {
    std::optional<std::string> next = queues.Take();
    ASSERT_TRUE(next.has_value());
    queues.Push("S", true);
    if (*next == "L") {
      ++large_taken;
      since_large = 0;
    } else {
      ++since_large;
      ASSERT_LE(since_large, kSmallPerLarge) << "take " << take;
    }
  }
  EXPECT_EQ(large_taken, 10);
}

// Small items taken while no large one waits do not count toward the
// bound: a large one that arrives later still goes after the small ones
// ahead of it, up to the bound.
TEST(ReadyQueuesTest, SmallTakenWithNoLargeWaitingDoNotCount) {
  ReadyQueues<std::string> queues(2);
  for (int i = 1; i <= 4; ++i) queues.Push("S" + std::to_string(i), true);
  EXPECT_EQ(*queues.Take(), "S1");
  EXPECT_EQ(*queues.Take(), "S2");
  queues.Push("L1", false);
  EXPECT_EQ(TakeAll(queues), (std::vector<std::string>{"S3", "S4", "L1"}));
}

// Small requests found outside the queues count too: once
// small_per_large of them were served while a large one waited, the next
// must be queued, and the large one is taken ahead of it.
TEST(ReadyQueuesTest, SmallServedOutsideTheQueuesCountTowardTheBound) {
  ReadyQueues<std::string> queues(2);
  EXPECT_TRUE(queues.MayServeSmall());  // no large one waits: not counted
  EXPECT_TRUE(queues.MayServeSmall());
  EXPECT_TRUE(queues.MayServeSmall());
  queues.Push("L1", false);
  EXPECT_TRUE(queues.MayServeSmall());
  EXPECT_TRUE(queues.MayServeSmall());
  EXPECT_FALSE(queues.MayServeSmall());
  queues.Push("S1", true);
  EXPECT_EQ(TakeAll(queues), (std::vector<std::string>{"L1", "S1"}));
  EXPECT_TRUE(queues.MayServeSmall());
}

}  // namespace ready_queues_test
}  // namespace tessera
