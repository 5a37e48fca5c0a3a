#include "common/training_mode.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(TrainingMode, ParsesEveryMode) {
  EXPECT_EQ(ParseTrainingMode("async")->kind, TrainingMode::Kind::kAsync);
  EXPECT_EQ(ParseTrainingMode("")->kind, TrainingMode::Kind::kAsync);
  EXPECT_EQ(ParseTrainingMode("sync")->kind, TrainingMode::Kind::kSync);
  EXPECT_EQ(ParseTrainingMode("mirrored")->kind, TrainingMode::Kind::kMirrored);
  absl::StatusOr<TrainingMode> ssp = ParseTrainingMode("ssp:3");
  ASSERT_TRUE(ssp.ok());
  EXPECT_EQ(ssp->kind, TrainingMode::Kind::kSsp);
  EXPECT_EQ(ssp->staleness, 3);
  EXPECT_EQ(ssp->ToString(), "ssp:3");
  EXPECT_EQ(ParseTrainingMode("ssp:0")->staleness, 0);
}

TEST(TrainingMode, OnlyMirroredRunsWithoutParameterServers) {
  EXPECT_FALSE(ParseTrainingMode("mirrored")->uses_parameter_servers());
  EXPECT_TRUE(ParseTrainingMode("sync")->uses_parameter_servers());
  EXPECT_TRUE(ParseTrainingMode("sync")->lockstep());
  EXPECT_FALSE(ParseTrainingMode("ssp:0")->lockstep());
}

TEST(TrainingMode, HybridReplicatesDenseAndShardsTables) {
  absl::StatusOr<TrainingMode> hybrid = ParseTrainingMode("hybrid");
  ASSERT_TRUE(hybrid.ok());
  EXPECT_EQ(hybrid->kind, TrainingMode::Kind::kHybrid);
  EXPECT_TRUE(hybrid->uses_parameter_servers());
  EXPECT_TRUE(hybrid->replicates_dense());
  EXPECT_TRUE(hybrid->lockstep());
  EXPECT_FALSE(hybrid->aggregates_steps());
  EXPECT_EQ(hybrid->ToString(), "hybrid");
  absl::StatusOr<TrainingMode> sync = ParseTrainingMode("hybrid:sync");
  ASSERT_TRUE(sync.ok());
  EXPECT_TRUE(sync->aggregates_steps());
  EXPECT_EQ(sync->ToString(), "hybrid:sync");
  absl::StatusOr<TrainingMode> ssp = ParseTrainingMode("hybrid:ssp:2");
  ASSERT_TRUE(ssp.ok());
  EXPECT_EQ(ssp->kind, TrainingMode::Kind::kHybrid);
  EXPECT_EQ(ssp->staleness, 2);
  EXPECT_FALSE(ssp->aggregates_steps());
  EXPECT_EQ(ssp->ToString(), "hybrid:ssp:2");
  EXPECT_TRUE(ParseTrainingMode("sync")->aggregates_steps());
  EXPECT_FALSE(ParseTrainingMode("mirrored")->aggregates_steps());
  EXPECT_FALSE(ParseTrainingMode("sync")->replicates_dense());
}

TEST(TrainingMode, HybridNeedsParameterServers) {
  std::string note;
  absl::StatusOr<TrainingMode> m = ModeForCluster("hybrid", 0, &note);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("needs parameter servers"));
}

TEST(TrainingMode, RejectsBadTextNamingIt) {
  for (const char* bad :
       {"ssp", "ssp:", "ssp:-1", "ssp:x", "SYNC", "bsp",
        "hybrid:", "hybrid:async", "hybrid:ssp", "hybrid:ssp:-1"}) {
    absl::StatusOr<TrainingMode> m = ParseTrainingMode(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_THAT(m.status().message(), HasSubstr(bad));
  }
}

}  // namespace
}  // namespace tessera
