#include "partitioners/hash_routing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tessera {
namespace {

using ::testing::HasSubstr;

// The routing of saved tables depends on these values never changing. They
// were computed independently in Python:
//   fmix64(k): k ^= k >> 33; k *= 0xFF51AFD7ED558CCD; k ^= k >> 33;
//              k *= 0xC4CEB9FE1A85EC53; k ^= k >> 33   (mod 2^64)
//   shard = (fmix64(id) * n) >> 64
TEST(HashRoutingTest, FixedGoldenValues) {
  EXPECT_EQ(HashRoutingMix(1), 0xB456BCFC34C2CB2Cull);
  EXPECT_EQ(HashRoutingMix(42), 0x810879608E4259CCull);
  EXPECT_EQ(HashRoutingMix(-1), 0x64B5720B4B825F21ull);
  struct Case {
    int64_t id;
    int shards[5];  // for 2, 3, 4, 7 and 1000 shards
  };
  const Case cases[] = {
      {0, {0, 0, 0, 0, 0}},
      {1, {1, 2, 2, 4, 704}},
      {2, {0, 0, 0, 1, 229}},
      {42, {1, 1, 2, 3, 504}},
      {-1, {0, 1, 1, 2, 393}},
      {std::numeric_limits<int64_t>::max(), {1, 2, 2, 4, 670}},
      {std::numeric_limits<int64_t>::min(), {1, 1, 2, 3, 560}},
      {123456789, {1, 1, 2, 3, 560}},
  };
  const int counts[] = {2, 3, 4, 7, 1000};
  for (const Case& c : cases) {
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(HashShardOf(c.id, counts[k]), c.shards[k])
          << "id " << c.id << " over " << counts[k] << " shards";
    }
  }
}

TEST(HashRoutingTest, OneShardTakesEverything) {
  for (int64_t id : {int64_t{0}, int64_t{-5}, int64_t{1} << 62}) {
    EXPECT_EQ(HashShardOf(id, 1), 0);
  }
}

// Sequential and strided ids (typical of hashed categorical features and
// of ids already reduced modulo something) spread evenly.
TEST(HashRoutingTest, SequentialAndStridedIdsAreBalanced) {
  for (int shards : {4, 7, 16}) {
    for (int64_t stride : {int64_t{1}, int64_t{16}, int64_t{1} << 32}) {
      std::vector<int64_t> count(shards, 0);
      const int64_t n = 400000;
      for (int64_t i = 0; i < n; ++i) {
        const int s = HashShardOf(i * stride, shards);
        ASSERT_GE(s, 0);
        ASSERT_LT(s, shards);
        ++count[s];
      }
      // Within 5 standard deviations of a fair binomial draw.
      const double p = 1.0 / shards;
      const double mean = n * p;
      const double sigma = std::sqrt(n * p * (1 - p));
      for (int s = 0; s < shards; ++s) {
        EXPECT_NEAR(count[s], mean, 5 * sigma)
            << "shard " << s << " of " << shards << ", stride " << stride;
      }
    }
  }
}

TEST(HashRoutingTest, CheckedVersionRefusesNoShards) {
  absl::StatusOr<int> shard = CheckedHashShardOf(7, 0);
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shard.status().message(), HasSubstr("num_shards"));
  shard = CheckedHashShardOf(42, 1000);
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ(*shard, 504);
}

}  // namespace
}  // namespace tessera
