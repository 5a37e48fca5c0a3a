// The filter of ids a stripe spilled (ps_server/spilled_id_filter.h).
#include "ps_server/spilled_id_filter.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tessera {
namespace {

TEST(SpilledIdFilterTest, HoldsEveryIdAddedAndRarelyOthers) {
  SpilledIdFilter filter;
  EXPECT_FALSE(filter.MayContain(7));
  EXPECT_EQ(filter.bytes(), 0);
  // Many levels: 1024, 2048, ... ids.
  constexpr int64_t kAdded = 100000;
  for (int64_t id = 0; id < kAdded; ++id) filter.Add(id * 7919 + 3);
  for (int64_t id = 0; id < kAdded; ++id) {
    ASSERT_TRUE(filter.MayContain(id * 7919 + 3)) << "lost id " << id;
  }
  int64_t false_positives = 0;
  constexpr int64_t kOthers = 100000;
  for (int64_t id = 0; id < kOthers; ++id) {
    false_positives += filter.MayContain(id * 7919 + 4);
  }
  // About 1% per level and 7 levels: well under 10% in all.
  EXPECT_LT(false_positives, kOthers / 10);
  // About 10 bits an id, at most twice that with the last level's room.
  EXPECT_GT(filter.bytes(), kAdded * 10 / 8);
  EXPECT_LT(filter.bytes(), kAdded * 20 / 8 + 4096);
}

TEST(SpilledIdFilterTest, OneFullFilterKeepsItsFalsePositiveRate) {
  SpilledIdFilter filter;
  for (int64_t id = 0; id < SpilledIdFilter::kFirstCapacity; ++id) {
    filter.Add(id * 7919 + 3);
  }
  int64_t false_positives = 0;
  constexpr int64_t kOthers = 100000;
  for (int64_t id = 0; id < kOthers; ++id) {
    false_positives += filter.MayContain(id * 7919 + 4);
  }
  // The contract is about 1% per filter; 3% leaves room for chance but
  // fails a filter three times worse than its own contract.
  EXPECT_LT(false_positives, kOthers * 3 / 100);
}

TEST(SpilledIdFilterTest, AnIdAddedAgainTakesNoMoreMemory) {
  SpilledIdFilter filter;
  constexpr int64_t kIds = 5000;
  for (int64_t id = 0; id < kIds; ++id) filter.Add(id);
  const int64_t bytes = filter.bytes();
  // Rows spilled, reloaded and spilled again, many times over.
  for (int round = 0; round < 20; ++round) {
    for (int64_t id = 0; id < kIds; ++id) filter.Add(id);
  }
  EXPECT_EQ(filter.bytes(), bytes);
  for (int64_t id = 0; id < kIds; ++id) ASSERT_TRUE(filter.MayContain(id));
}

TEST(SpilledIdFilterTest, SwapExchangesContents) {
  SpilledIdFilter a;
  SpilledIdFilter b;
  a.Add(-5);
  a.Swap(b);
  EXPECT_FALSE(a.MayContain(-5));
  EXPECT_EQ(a.bytes(), 0);
  EXPECT_TRUE(b.MayContain(-5));
  EXPECT_GT(b.bytes(), 0);
}

}  // namespace
}  // namespace tessera
