#include "coordinator/data_plan.h"

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

DataPlan MustCreate(int64_t examples, int shards, int64_t batch,
                    int64_t steps_per_epoch, uint64_t seed) {
  absl::StatusOr<DataPlan> plan =
      DataPlan::Create(examples, shards, batch, steps_per_epoch, seed);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

std::vector<std::vector<int64_t>> Ids(const std::vector<PlannedStep>& steps) {
  std::vector<std::vector<int64_t>> out;
  for (const PlannedStep& s : steps) out.push_back(s.example_ids);
  return out;
}

TEST(DataPlanTest, ShardsFollowDivLayout) {
  const DataPlan plan = MustCreate(10, 3, 2, 0, 1);
  ASSERT_EQ(plan.shards().size(), 3u);
  EXPECT_EQ(plan.shards()[0].begin, 0);
  EXPECT_EQ(plan.shards()[0].end, 4);
  EXPECT_EQ(plan.shards()[1].begin, 4);
  EXPECT_EQ(plan.shards()[1].end, 7);
  EXPECT_EQ(plan.shards()[2].begin, 7);
  EXPECT_EQ(plan.shards()[2].end, 10);
}

TEST(DataPlanTest, EvenSplitHasEqualShards) {
  const DataPlan plan = MustCreate(12, 4, 5, 0, 1);
  for (const DataShard& s : plan.shards()) EXPECT_EQ(s.size(), 3);
}

TEST(DataPlanTest, OnePassVisitsEveryExampleOncePerEpoch) {
  const int64_t examples = 103;
  const int64_t batch = 8;
  DataPlan plan = MustCreate(examples, 3, batch, 0, 7);
  // Shards of 35, 34, 34 examples: 5 + 5 + 5 batches.
  EXPECT_EQ(plan.steps_per_epoch(), 15);
  for (int epoch = 0; epoch < 3; ++epoch) {
    const std::vector<PlannedStep> steps = plan.NextEpoch();
    EXPECT_EQ(static_cast<int64_t>(steps.size()), plan.steps_per_epoch());
    std::map<int64_t, int> seen;
    std::map<int, int> short_batches;
    for (const PlannedStep& step : steps) {
      ASSERT_GE(step.shard, 0);
      ASSERT_LT(step.shard, 3);
      const DataShard& shard = plan.shards()[step.shard];
      ASSERT_FALSE(step.example_ids.empty());
      ASSERT_LE(static_cast<int64_t>(step.example_ids.size()), batch);
      if (static_cast<int64_t>(step.example_ids.size()) < batch) {
        ++short_batches[step.shard];
      }
      for (int64_t id : step.example_ids) {
        EXPECT_GE(id, shard.begin) << "epoch " << epoch;
        EXPECT_LT(id, shard.end) << "epoch " << epoch;
        ++seen[id];
      }
    }
    ASSERT_EQ(static_cast<int64_t>(seen.size()), examples);
    for (const auto& [id, count] : seen) {
      EXPECT_EQ(count, 1) << "example " << id << " in epoch " << epoch;
    }
    // 35 % 8 = 3 and 34 % 8 = 2: every shard ends on one short batch.
    EXPECT_EQ(short_batches, (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}}));
  }
}

TEST(DataPlanTest, OnePassInterleavesShardsRoundRobin) {
  DataPlan plan = MustCreate(20, 2, 5, 0, 3);
  const std::vector<PlannedStep> steps = plan.NextEpoch();
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0].shard, 0);
  EXPECT_EQ(steps[1].shard, 1);
  EXPECT_EQ(steps[2].shard, 0);
  EXPECT_EQ(steps[3].shard, 1);
}

TEST(DataPlanTest, EpochsDifferButAreReproducible) {
  DataPlan a = MustCreate(64, 2, 8, 0, 42);
  DataPlan b = MustCreate(64, 2, 8, 0, 42);
  DataPlan c = MustCreate(64, 2, 8, 0, 43);
  const auto a0 = Ids(a.NextEpoch());
  const auto a1 = Ids(a.NextEpoch());
  EXPECT_NE(a0, a1);
  EXPECT_EQ(Ids(b.NextEpoch()), a0);
  EXPECT_EQ(Ids(b.NextEpoch()), a1);
  EXPECT_NE(Ids(c.NextEpoch()), a0);
}

TEST(DataPlanTest, ShuffleIsNotIdentity) {
  DataPlan plan = MustCreate(100, 1, 100, 0, 5);
  const std::vector<PlannedStep> steps = plan.NextEpoch();
  ASSERT_EQ(steps.size(), 1u);
  std::vector<int64_t> sorted(100);
  for (int i = 0; i < 100; ++i) sorted[i] = i;
  EXPECT_NE(steps[0].example_ids, sorted);
  EXPECT_EQ(std::set<int64_t>(steps[0].example_ids.begin(),
                              steps[0].example_ids.end())
                .size(),
            100u);
}

TEST(DataPlanTest, FixedStepsGivesFullBatchesRoundRobin) {
  const int64_t batch = 4;
  DataPlan plan = MustCreate(30, 3, batch, 7, 9);
  EXPECT_EQ(plan.steps_per_epoch(), 7);
  const std::vector<PlannedStep> steps = plan.NextEpoch();
  ASSERT_EQ(steps.size(), 7u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].shard, static_cast<int>(i % 3));
    EXPECT_EQ(static_cast<int64_t>(steps[i].example_ids.size()), batch);
    const DataShard& shard = plan.shards()[steps[i].shard];
    for (int64_t id : steps[i].example_ids) {
      EXPECT_GE(id, shard.begin);
      EXPECT_LT(id, shard.end);
    }
  }
}

TEST(DataPlanTest, FixedStepsContinueAcrossEpochs) {
  // One shard of 10 examples, batches of 4, 2 steps per epoch: epoch 0
  // takes 8 examples, epoch 1 takes the remaining 2 and wraps into a new
  // permutation. So the first 10 ids over both epochs are a permutation.
  DataPlan plan = MustCreate(10, 1, 4, 2, 11);
  std::vector<int64_t> ids;
  for (int epoch = 0; epoch < 2; ++epoch) {
    const std::vector<PlannedStep> steps = plan.NextEpoch();
    ASSERT_EQ(steps.size(), 2u);
    for (const PlannedStep& s : steps) {
      ASSERT_EQ(s.example_ids.size(), 4u);
      ids.insert(ids.end(), s.example_ids.begin(), s.example_ids.end());
    }
  }
  ASSERT_EQ(ids.size(), 16u);
  const std::set<int64_t> first_pass(ids.begin(), ids.begin() + 10);
  EXPECT_EQ(first_pass.size(), 10u);
  EXPECT_EQ(*first_pass.begin(), 0);
  EXPECT_EQ(*first_pass.rbegin(), 9);
  // The next pass starts fresh: its first 6 ids are distinct too.
  EXPECT_EQ(std::set<int64_t>(ids.begin() + 10, ids.end()).size(), 6u);

  // Reproducible: a second plan with the same seed takes the same path.
  DataPlan again = MustCreate(10, 1, 4, 2, 11);
  std::vector<int64_t> ids_again;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (const PlannedStep& s : again.NextEpoch()) {
      ids_again.insert(ids_again.end(), s.example_ids.begin(),
                       s.example_ids.end());
    }
  }
  EXPECT_EQ(ids_again, ids);
}

TEST(DataPlanTest, RejectsBadArguments) {
  absl::StatusOr<DataPlan> zero_batch = DataPlan::Create(10, 2, 0, 0, 1);
  EXPECT_EQ(zero_batch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero_batch.status().message(), HasSubstr("batch_size"));

  absl::StatusOr<DataPlan> no_shards = DataPlan::Create(10, 0, 4, 0, 1);
  EXPECT_EQ(no_shards.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_shards.status().message(), HasSubstr("shard"));

  absl::StatusOr<DataPlan> too_few = DataPlan::Create(2, 3, 4, 0, 1);
  EXPECT_EQ(too_few.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_few.status().message(), HasSubstr("2 training examples"));

  EXPECT_EQ(DataPlan::Create(10, 2, 4, -1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(DataPlan::Create(3, 3, 4, 0, 1).ok());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(StreamPlanTest, OnePassEpochsCoverEveryPositionOnce) {
  auto plan = StreamPlan::Create({10, 3, 7}, 4, 0);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->steps_per_epoch(), 3 + 1 + 2);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::vector<bool>> seen = {
        std::vector<bool>(10), std::vector<bool>(3), std::vector<bool>(7)};
    const std::vector<PlannedStreamStep> steps = plan->NextEpoch();
    ASSERT_EQ(steps.size(), 6u);
    EXPECT_EQ(steps[0].shard, 0);
    EXPECT_EQ(steps[1].shard, 1);
    for (const PlannedStreamStep& s : steps) {
      EXPECT_EQ(s.pass, epoch);
      EXPECT_LE(s.count, 4);
      for (int64_t p = s.first; p < s.first + s.count; ++p) {
        EXPECT_FALSE(seen[s.shard][p]);
        seen[s.shard][p] = true;
      }
    }
    for (const auto& shard : seen) {
      for (bool b : shard) EXPECT_TRUE(b);
    }
  }
}

TEST(StreamPlanTest, FixedStepsContinueAndRestore) {
  auto plan = StreamPlan::Create({5, 6}, 2, 5);
  ASSERT_TRUE(plan.ok());
  std::vector<PlannedStreamStep> first = plan->NextEpoch();
  ASSERT_EQ(first.size(), 5u);
  // Shard 0: [0,2) [2,4) [4,5); shard 1: [0,2) [2,4).
  EXPECT_EQ(first[4].shard, 0);
  EXPECT_EQ(first[4].first, 4);
  EXPECT_EQ(first[4].count, 1);
  auto restored = StreamPlan::Create({5, 6}, 2, 5);
  ASSERT_TRUE(restored->Restore(plan->epoch(), plan->cursors()).ok());
  std::vector<PlannedStreamStep> a = plan->NextEpoch();
  std::vector<PlannedStreamStep> b = restored->NextEpoch();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].shard, b[i].shard);
    EXPECT_EQ(a[i].pass, b[i].pass);
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].count, b[i].count);
  }
  // Shard 0 wrapped to pass 1.
  EXPECT_EQ(a[1].shard, 1);
  EXPECT_EQ(a[0].pass, 1);
  EXPECT_EQ(a[0].first, 0);
}

TEST(StreamPlanTest, RejectsEmptyShards) {
  EXPECT_FALSE(StreamPlan::Create({3, 0}, 2, 0).ok());
  EXPECT_FALSE(StreamPlan::Create({}, 2, 0).ok());
}

}  // namespace
}  // namespace tessera
