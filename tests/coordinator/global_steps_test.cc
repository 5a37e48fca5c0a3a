#include "coordinator/global_steps.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

std::vector<int> Shards(const std::vector<PlannedStep>& round) {
  std::vector<int> out;
  for (const PlannedStep& s : round) out.push_back(s.shard);
  return out;
}

TEST(GlobalSteps, OneRoundPerPassOverTheShards) {
  // 2 workers, 10 and 9 examples, batch 4: shard 0 has 4,4,2 and shard 1
  // has 4,4,1 examples.
  absl::StatusOr<DataPlan> plan = DataPlan::Create(19, 2, 4, 0, 7);
  ASSERT_TRUE(plan.ok());
  auto rounds = GroupIntoGlobalSteps(plan->NextEpoch(), 2, false);
  ASSERT_EQ(rounds.size(), 3u);
  for (const auto& round : rounds) {
    EXPECT_EQ(Shards(round), (std::vector<int>{0, 1}));
  }
  EXPECT_EQ(rounds[2][0].example_ids.size(), 2u);
  EXPECT_EQ(rounds[2][1].example_ids.size(), 1u);
}

TEST(GlobalSteps, ShortRoundsArePaddedWithEmptyStepsWhenAsked) {
  // 3 workers, shard sizes 5, 5, 4 with batch 5: shard 2 runs out in the
  // first round's... it has one step of 4; the others one of 5 each.
  std::vector<PlannedStep> steps = {{0, {1, 2}}, {1, {3}}, {0, {4}}};
  auto unpadded = GroupIntoGlobalSteps(steps, 3, false);
  ASSERT_EQ(unpadded.size(), 2u);
  EXPECT_EQ(Shards(unpadded[0]), (std::vector<int>{0, 1}));
  EXPECT_EQ(Shards(unpadded[1]), (std::vector<int>{0}));
  auto padded = GroupIntoGlobalSteps(steps, 3, true);
  ASSERT_EQ(padded.size(), 2u);
  EXPECT_EQ(Shards(padded[0]), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(Shards(padded[1]), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(padded[0][2].example_ids.empty());
  EXPECT_EQ(padded[1][0].example_ids, (std::vector<int64_t>{4}));
  EXPECT_TRUE(padded[1][1].example_ids.empty());
}

TEST(GlobalSteps, EveryExampleKeepsItsPlace) {
  absl::StatusOr<DataPlan> plan = DataPlan::Create(1000, 4, 16, 0, 1);
  ASSERT_TRUE(plan.ok());
  std::vector<PlannedStep> steps = plan->NextEpoch();
  size_t examples = 0;
  for (const PlannedStep& s : steps) examples += s.example_ids.size();
  size_t grouped = 0;
  for (const auto& round : GroupIntoGlobalSteps(steps, 4, true)) {
    EXPECT_EQ(round.size(), 4u);
    for (const PlannedStep& s : round) grouped += s.example_ids.size();
  }
  EXPECT_EQ(grouped, examples);
  EXPECT_EQ(examples, 1000u);
}

TEST(GlobalSteps, RoundsOfARingReformedTakeStepsInOrderAndPadTheLast) {
  std::vector<PlannedStep> steps = {
      {0, {1, 2}}, {1, {}}, {1, {3}}, {0, {4}}, {1, {5}}};
  auto rounds = GroupIntoRounds(steps, 3);
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_EQ(Shards(rounds[0]), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(rounds[0][2].example_ids, (std::vector<int64_t>{4}));
  ASSERT_EQ(rounds[1].size(), 3u);
  EXPECT_EQ(rounds[1][0].example_ids, (std::vector<int64_t>{5}));
  EXPECT_TRUE(rounds[1][1].empty());
  EXPECT_TRUE(rounds[1][2].empty());
  EXPECT_TRUE(GroupIntoRounds({}, 2).empty());
}

}  // namespace
}  // namespace tessera
