#include "ps_server/sync_steps.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/row_table.h"
#include "ps_server/shard.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::ConstantInit;
using ps_test::MakeShardDef;
using ::testing::ElementsAre;
using Outcome = SyncSteps::Outcome;

class SyncStepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Optimizer>> sgd =
        CreateOptimizer(ps_test::SgdConfig(1.0f));
    ASSERT_TRUE(sgd.ok()) << sgd.status();
    sgd_ = *std::move(sgd);
    dense_ = MakeShared(MakeShardDef("w", 0, {2}, 0, 2, ConstantInit(10)));
    // Rows [0, 4) of a [4, 2] table.
    rows_ = std::make_shared<FixedRowTable>(
        MakeShared(MakeShardDef("t", 0, {4, 2}, 0, 4, ConstantInit(10))));
  }

  std::shared_ptr<Shard> MakeShared(const ShardDef& def) {
    absl::StatusOr<std::unique_ptr<Shard>> shard =
        Shard::Create(def, sgd_.get());
    EXPECT_TRUE(shard.ok()) << shard.status();
    return std::shared_ptr<Shard>(*std::move(shard));
  }

  Outcome Dense(int64_t step, int required, int part, std::vector<float> g) {
    absl::StatusOr<Outcome> o =
        steps_.AddDense(SyncPush{step, required, part}, dense_, g);
    EXPECT_TRUE(o.ok()) << o.status();
    return o.ok() ? *o : Outcome::kLate;
  }

  Outcome Rows(int64_t step, int required, int part, std::vector<int64_t> ids,
               std::vector<float> g) {
    absl::StatusOr<Outcome> o =
        steps_.AddRows(SyncPush{step, required, part}, rows_, ids, g);
    EXPECT_TRUE(o.ok()) << o.status();
    return o.ok() ? *o : Outcome::kLate;
  }

  std::vector<float> DenseValues() {
    std::vector<float> v(2);
    dense_->ReadBytes(0, 8, reinterpret_cast<char*>(v.data()));
    return v;
  }

  std::vector<float> Row(int64_t id) {
    std::vector<float> v(2);
    const int64_t ids[1] = {id};
    rows_->Read(ids, v.data());
    return v;
  }

  std::unique_ptr<Optimizer> sgd_;
  std::shared_ptr<Shard> dense_;
  std::shared_ptr<RowTable> rows_;
  SyncSteps steps_;
};

TEST_F(SyncStepsTest, ACompleteStepIsAppliedWhenTheNextStepShowsUp) {
  EXPECT_EQ(Dense(0, 2, 0, {2, 4}), Outcome::kAccumulated);
  EXPECT_EQ(Dense(0, 2, 1, {4, 8}), Outcome::kComplete);
  // Complete, but not applied: a part run again would still read 10.
  steps_.ApplyBefore(0);
  EXPECT_THAT(DenseValues(), ElementsAre(10.0f, 10.0f));
  EXPECT_EQ(dense_->version(), 0);
  // A pull for step 1 sees step 0: SGD with rate 1 on the average (3, 6).
  steps_.ApplyBefore(1);
  EXPECT_THAT(DenseValues(), ElementsAre(7.0f, 4.0f));
  EXPECT_EQ(dense_->version(), 1);
  // Once.
  steps_.ApplyBefore(2);
  steps_.ApplyBefore(std::nullopt);
  EXPECT_THAT(DenseValues(), ElementsAre(7.0f, 4.0f));
}

TEST_F(SyncStepsTest, APartPushedTwiceCountsOnce) {
  // Part 0's worker died after this push and its step ran again: the
  // second push of part 0 does not complete the step, nor add twice.
  EXPECT_EQ(Dense(5, 2, 0, {2, 2}), Outcome::kAccumulated);
  EXPECT_EQ(Dense(5, 2, 0, {2, 2}), Outcome::kDuplicate);
  steps_.ApplyBefore(std::nullopt);
  EXPECT_THAT(DenseValues(), ElementsAre(10.0f, 10.0f));
  EXPECT_EQ(Dense(5, 2, 1, {4, 4}), Outcome::kComplete);
  EXPECT_EQ(Dense(5, 2, 1, {4, 4}), Outcome::kDuplicate);
  steps_.ApplyBefore(std::nullopt);
  EXPECT_THAT(DenseValues(), ElementsAre(7.0f, 7.0f));
  EXPECT_EQ(steps_.duplicates(), 2);
  EXPECT_EQ(steps_.dropped(), 0);
}

TEST_F(SyncStepsTest, UntaggedPullAppliesCompleteStepsAndKeepsIncomplete) {
  EXPECT_EQ(Dense(0, 2, 0, {2, 2}), Outcome::kAccumulated);
  steps_.ApplyBefore(std::nullopt);  // evaluation in between
  EXPECT_EQ(Dense(0, 2, 1, {4, 4}), Outcome::kComplete);
  steps_.ApplyBefore(std::nullopt);
  EXPECT_THAT(DenseValues(), ElementsAre(7.0f, 7.0f));
}

TEST_F(SyncStepsTest, LatePushesAreDroppedAndCounted) {
  EXPECT_EQ(Dense(3, 2, 0, {1, 1}), Outcome::kAccumulated);
  EXPECT_EQ(Dense(3, 2, 1, {3, 3}), Outcome::kComplete);
  // A backup worker's third part, after the step was complete.
  EXPECT_EQ(Dense(3, 2, 2, {100, 100}), Outcome::kLate);
  steps_.ApplyBefore(4);
  // Step 3 was applied: its parts now, or an older step's, are late.
  EXPECT_EQ(Dense(3, 2, 0, {100, 100}), Outcome::kLate);
  EXPECT_EQ(Dense(2, 2, 0, {100, 100}), Outcome::kLate);
  EXPECT_THAT(DenseValues(), ElementsAre(8.0f, 8.0f));
  EXPECT_EQ(steps_.dropped(), 3);
}

TEST_F(SyncStepsTest, ANewerStepDropsAnIncompleteOne) {
  EXPECT_EQ(Dense(0, 2, 0, {50, 50}), Outcome::kAccumulated);
  EXPECT_EQ(Dense(1, 2, 0, {2, 2}), Outcome::kAccumulated);
  EXPECT_EQ(Dense(1, 2, 1, {4, 4}), Outcome::kComplete);
  steps_.ApplyBefore(2);
  EXPECT_THAT(DenseValues(), ElementsAre(7.0f, 7.0f));
  EXPECT_EQ(steps_.dropped(), 1);
}

TEST_F(SyncStepsTest, RefusesBadPushesWithoutChangingState) {
  EXPECT_EQ(steps_.AddDense({0, 2, 0}, dense_, std::vector<float>{1, 2, 3})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Dense(0, 2, 0, {2, 2}), Outcome::kAccumulated);
  // Disagrees on the parts the step needs.
  EXPECT_EQ(steps_.AddDense({0, 3, 1}, dense_, std::vector<float>{1, 1})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Dense(0, 2, 1, {4, 4}), Outcome::kComplete);
  steps_.ApplyBefore(1);
  EXPECT_THAT(DenseValues(), ElementsAre(7.0f, 7.0f));
}

TEST_F(SyncStepsTest, RowsAreSummedPerRowAndAveragedOverTheParts) {
  // Part 0 touches rows 1 and 3 (row 1 twice: summed), part 1 row 1 and 2.
  EXPECT_EQ(Rows(0, 2, 0, {1, 3, 1}, {1, 1, 2, 2, 1, 1}),
            Outcome::kAccumulated);
  EXPECT_EQ(Rows(0, 2, 1, {2, 1}, {4, 4, 2, 2}), Outcome::kComplete);
  EXPECT_THAT(Row(1), ElementsAre(10.0f, 10.0f));
  steps_.ApplyBefore(1);
  // Row 1: (1 + 1 + 2) / 2 = 2; row 2: 4 / 2; row 3: 2 / 2; row 0 none.
  EXPECT_THAT(Row(0), ElementsAre(10.0f, 10.0f));
  EXPECT_THAT(Row(1), ElementsAre(8.0f, 8.0f));
  EXPECT_THAT(Row(2), ElementsAre(8.0f, 8.0f));
  EXPECT_THAT(Row(3), ElementsAre(9.0f, 9.0f));
}

TEST_F(SyncStepsTest, APartWithNoRowsCountsAndTheStepStillUpdatesTheShard) {
  EXPECT_EQ(Rows(0, 2, 0, {}, {}), Outcome::kAccumulated);
  EXPECT_EQ(Rows(0, 2, 1, {}, {}), Outcome::kComplete);
  steps_.ApplyBefore(1);
  // One update of the shard (Adam's step counts it), no row changed.
  EXPECT_THAT(Row(2), ElementsAre(10.0f, 10.0f));
  EXPECT_EQ(Rows(1, 2, 0, {2}, {2, 2}), Outcome::kAccumulated);
  EXPECT_EQ(Rows(1, 2, 0, {2}, {2, 2}), Outcome::kDuplicate);
  EXPECT_EQ(Rows(1, 2, 1, {}, {}), Outcome::kComplete);
  steps_.ApplyBefore(std::nullopt);
  EXPECT_THAT(Row(2), ElementsAre(9.0f, 9.0f));
}

TEST_F(SyncStepsTest, ConcurrentPartsApplyEachStepExactlyOnce) {
  constexpr int kWorkers = 8, kSteps = 50;
  // Every worker pushes gradient 1 for every step, then "pulls" for the
  // next; each step's average is 1, so SGD takes the values down by one.
  std::vector<std::thread> threads;
  std::atomic<int> next{0};
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (int s = 0; s < kSteps; ++s) {
        absl::StatusOr<Outcome> o = steps_.AddDense(
            SyncPush{s, kWorkers, w}, dense_, std::vector<float>{1, 1});
        EXPECT_TRUE(o.ok());
        // A barrier, as the coordinator's: step s + 1 starts once every
        // part of step s is in.
        next.fetch_add(1);
        while (next.load() < (s + 1) * kWorkers) std::this_thread::yield();
        steps_.ApplyBefore(s + 1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_THAT(DenseValues(), ElementsAre(10.0f - kSteps, 10.0f - kSteps));
  EXPECT_EQ(dense_->version(), kSteps);
  EXPECT_EQ(steps_.dropped(), 0);
}

// Global-norm clipping across servers: the partial squared norm of a
// complete step's average per group, and the step applied scaled.
TEST_F(SyncStepsTest, PartialNormsOfACompleteStepAndItsClippedApply) {
  auto group_of = [](const std::string& shard) -> std::string {
    return shard.rfind("w", 0) == 0 ? "dense" : "tables";
  };
  EXPECT_EQ(Dense(0, 2, 0, {2, 4}), Outcome::kAccumulated);
  // Incomplete: no norm yet, named by its shard.
  absl::StatusOr<std::map<std::string, double>> partial =
      steps_.PartialNorms(0, group_of);
  ASSERT_FALSE(partial.ok());
  EXPECT_THAT(partial.status().message(), ::testing::HasSubstr("1 of 2"));
  EXPECT_EQ(Dense(0, 2, 1, {4, 8}), Outcome::kComplete);
  EXPECT_EQ(Rows(0, 2, 0, {1}, {6, 0}), Outcome::kAccumulated);
  EXPECT_EQ(Rows(0, 2, 1, {1, 3}, {0, 0, 0, 8}), Outcome::kComplete);
  partial = steps_.PartialNorms(0, group_of);
  ASSERT_TRUE(partial.ok()) << partial.status();
  // Averages: dense {3, 6}; rows 1: {3, 0}, 3: {0, 4}.
  EXPECT_DOUBLE_EQ(partial->at("dense"), 45);
  EXPECT_DOUBLE_EQ(partial->at("tables"), 25);
  // Shards outside any group add nothing.
  partial =
      steps_.PartialNorms(0, [](const std::string&) { return std::string(); });
  ASSERT_TRUE(partial.ok());
  EXPECT_TRUE(partial->empty());
  steps_.SetClipScales(0, [](const std::string& shard) {
    return shard.rfind("w", 0) == 0 ? 0.5f : 1.0f;
  });
  steps_.ApplyBefore(1);
  // SGD with rate 1: 10 - 0.5 * {3, 6}; rows unscaled.
  EXPECT_THAT(DenseValues(), ElementsAre(8.5f, 7.0f));
  EXPECT_THAT(Row(1), ElementsAre(7.0f, 10.0f));
  EXPECT_THAT(Row(3), ElementsAre(10.0f, 6.0f));
}

TEST_F(SyncStepsTest, AfterResetEarlierStepsAreNoLongerLate) {
  EXPECT_EQ(Dense(7, 1, 0, {1, 1}), Outcome::kComplete);
  steps_.ApplyBefore(8);
  steps_.ResetAll();  // restored from a checkpoint at an earlier step
  EXPECT_EQ(Dense(3, 1, 0, {1, 1}), Outcome::kComplete);
  steps_.ApplyBefore(4);
  EXPECT_THAT(DenseValues(), ElementsAre(8.0f, 8.0f));
}

}  // namespace
}  // namespace tessera
