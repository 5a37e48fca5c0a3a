#include "common/model/table_placement.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

VariableDef Table(const std::string& name, int64_t vocab, int64_t dim) {
  VariableDef v;
  v.name = name;
  v.shape = {vocab, dim};
  v.sparse = true;
  return v;
}

std::vector<VariableDef> Variables() {
  VariableDef dense;
  dense.name = "logit/kernel";
  dense.shape = {8, 1};
  // 1000 x 16 floats = 64000 bytes, 5000 x 4 = 80000, and a growing one.
  return {Table("small", 1000, 16), Table("large", 5000, 4),
          Table("grows", 0, 8), dense};
}

TrainingMode Mode(const char* text) { return *ParseTrainingMode(text); }

TEST(PlaceTables, HybridReplicatesFixedTablesUpToTheThreshold) {
  absl::StatusOr<std::vector<TablePlan>> plans =
      PlaceTables(Variables(), JobConfig(), Mode("hybrid"));
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 3u);
  EXPECT_EQ((*plans)[0].name, "small");
  EXPECT_TRUE((*plans)[0].replicated);
  EXPECT_EQ((*plans)[0].bytes, 64000);
  EXPECT_THAT((*plans)[0].reason, HasSubstr("at most 64 KiB"));
  EXPECT_FALSE((*plans)[1].replicated);
  EXPECT_THAT((*plans)[1].reason, HasSubstr("larger than 64 KiB"));
  EXPECT_FALSE((*plans)[2].replicated);
  EXPECT_EQ((*plans)[2].bytes, 0);
  EXPECT_THAT((*plans)[2].reason, HasSubstr("grows"));
  EXPECT_EQ(ReplicatedTables(*plans).size(), 1u);
}

TEST(PlaceTables, ThresholdAndExplicitPlacementsOverrideTheSize) {
  JobConfig job;
  job.set_replicate_tables_below(100000);
  (*job.mutable_table_placements())["small"] = TABLE_SHARDED;
  absl::StatusOr<std::vector<TablePlan>> plans =
      PlaceTables(Variables(), job, Mode("hybrid:sync"));
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_FALSE((*plans)[0].replicated);
  EXPECT_THAT((*plans)[0].reason, HasSubstr("TABLE_SHARDED"));
  EXPECT_TRUE((*plans)[1].replicated);
  job.set_replicate_tables_below(-1);
  plans = PlaceTables(Variables(), job, Mode("hybrid"));
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_TRUE(ReplicatedTables(*plans).empty());
}

TEST(PlaceTables, ModesWithoutReplicasKeepTablesOnTheServers) {
  for (const char* mode : {"async", "ssp:2", "sync"}) {
    absl::StatusOr<std::vector<TablePlan>> plans =
        PlaceTables(Variables(), JobConfig(), Mode(mode));
    ASSERT_TRUE(plans.ok()) << plans.status();
    EXPECT_TRUE(ReplicatedTables(*plans).empty()) << mode;
    EXPECT_THAT((*plans)[0].reason, HasSubstr(mode));
  }
  JobConfig job;
  (*job.mutable_table_placements())["small"] = TABLE_REPLICATED;
  absl::StatusOr<std::vector<TablePlan>> refused =
      PlaceTables(Variables(), job, Mode("sync"));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("\"small\" is TABLE_REPLICATED, but mode sync"));
}

TEST(PlaceTables, MirroredReplicatesEveryFixedTable) {
  absl::StatusOr<std::vector<TablePlan>> plans =
      PlaceTables(Variables(), JobConfig(), Mode("mirrored"));
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_TRUE((*plans)[0].replicated);
  EXPECT_TRUE((*plans)[1].replicated);  // over the threshold: no servers
  EXPECT_FALSE((*plans)[2].replicated);
}

TEST(PlaceTables, RefusesAGrowingReplicatedTableAndUnknownNames) {
  JobConfig job;
  (*job.mutable_table_placements())["grows"] = TABLE_REPLICATED;
  absl::StatusOr<std::vector<TablePlan>> plans =
      PlaceTables(Variables(), job, Mode("hybrid"));
  ASSERT_FALSE(plans.ok());
  EXPECT_THAT(plans.status().message(),
              HasSubstr("table \"grows\" grows with the ids it meets"));
  JobConfig unknown;
  (*unknown.mutable_table_placements())["nope"] = TABLE_SHARDED;
  plans = PlaceTables(Variables(), unknown, Mode("hybrid"));
  ASSERT_FALSE(plans.ok());
  EXPECT_THAT(plans.status().message(), HasSubstr("\"nope\""));
  EXPECT_THAT(plans.status().message(), HasSubstr("small, large, grows"));
}

// Each table's rule is its optimizer's table_updates (issue #42): lazy
// unless set, dense for a table whose optimizer says so; a growing table
// has no whole to step densely.
TEST(PlaceTables, TellsEachTablesUpdatesAndRefusesDenseGrowingTables) {
  JobConfig job;
  job.mutable_optimizer()->mutable_adam();
  OptimizerConfig& large = (*job.mutable_table_optimizers())["large"];
  large.mutable_adam();
  large.set_table_updates(TABLE_UPDATES_DENSE);
  absl::StatusOr<std::vector<TablePlan>> plans =
      PlaceTables(Variables(), job, Mode("hybrid"));
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_EQ((*plans)[0].updates, TABLE_UPDATES_LAZY);
  EXPECT_EQ((*plans)[1].updates, TABLE_UPDATES_DENSE);
  EXPECT_EQ((*plans)[2].updates, TABLE_UPDATES_LAZY);
  job.mutable_optimizer()->set_table_updates(TABLE_UPDATES_DENSE);
  plans = PlaceTables(Variables(), job, Mode("sync"));
  ASSERT_FALSE(plans.ok());
  EXPECT_THAT(plans.status().message(),
              HasSubstr("table \"grows\" grows with the ids it meets"));
  EXPECT_THAT(plans.status().message(), HasSubstr("TABLE_UPDATES_DENSE"));
}

}  // namespace
}  // namespace tessera
