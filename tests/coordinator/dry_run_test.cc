// The coordinator's --dry_run output of a hybrid job (issue #42).

#include "coordinator/dry_run.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/model/model_presets.h"
#include "common/model/table_placement.h"
#include "common/training_mode.h"
#include "coordinator/variable_plan.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// A hybrid click model on two servers whose three small tables (100 rows of
// 4 floats: 1600 bytes each) are all replicated: the servers hold nothing.
class HybridDryRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        R"pb(
          model {
            kind: "ctr"
            embedding_dim: 4
            num_fields: 3
            vocab_size: 100
            hidden_units: 8
          }
          optimizer {
            learning_rate: 0.1
            adagrad {}
          }
          mode: "hybrid"
          schedule { epochs: 1 batch_size: 8 }
        )pb",
        &job_));
    absl::StatusOr<ModelDef> model = JobModel(job_);
    ASSERT_TRUE(model.ok()) << model.status();
    *job_.mutable_model_def() = *model;
    absl::StatusOr<ClusterSpec> cluster =
        ClusterSpec::FromParts({{"chief", {"localhost:1"}},
                                {"ps", {"localhost:2", "localhost:3"}},
                                {"worker", {"localhost:4"}}},
                               {"chief", 0});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *cluster;
    std::string note;
    absl::StatusOr<TrainingMode> mode = ModeForCluster(job_.mode(), 2, &note);
    ASSERT_TRUE(mode.ok()) << mode.status();
    mode_ = *mode;
    absl::StatusOr<VariablePlan> plan = PlanVariables(job_, 2);
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<std::vector<TablePlan>> tables =
        PlaceTables(plan->variables, job_, mode_);
    ASSERT_TRUE(tables.ok()) << tables.status();
    tables_ = *tables;
    served_ = ServedPlan(*plan, mode_, ReplicatedTables(tables_));
  }

  JobConfig job_;
  std::optional<ClusterSpec> cluster_;
  TrainingMode mode_;
  std::vector<TablePlan> tables_;
  VariablePlan served_;
};

TEST_F(HybridDryRunTest, ServersLeftIdleAreNoted) {
  EXPECT_THAT(IdleServersNote(mode_, served_, 2),
              HasSubstr("the 2 parameter servers of the cluster will hold "
                        "nothing and stay idle"));
  // Not in async, whose servers hold everything.
  TrainingMode async;
  EXPECT_EQ(IdleServersNote(async, served_, 2), "");
}

TEST_F(HybridDryRunTest, TheReplicatedTablesBytesAreCounted) {
  DryRunOptions options;
  options.check_data = false;
  options.dense_on_workers = true;
  options.tables = tables_;
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  ASSERT_TRUE(DryRun(job_, *cluster_, served_, options, out).ok());
  std::fclose(out);
  const std::string text(buffer, size);
  std::free(buffer);
  EXPECT_THAT(text, HasSubstr("and replicated tables: 3 (4.7 KiB) "
                              "replicated on every worker"));
}

// Issue #43: a sync click model's three 1000-row dim-16 tables in fp16
// with rowwise_adagrad, on two servers: 16 * 2 bytes of values and one
// accumulator float, 36 bytes a row, against 128 in fp32 with Adagrad.
TEST(TableMemoryTest, PrecisionAndRowWiseSlotsSetTheBytesPerRow) {
  JobConfig job;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        model {
          kind: "ctr"
          embedding_dim: 16
          num_fields: 3
          vocab_size: 1000
          hidden_units: 8
        }
        optimizer {
          learning_rate: 0.1
          adagrad {}
        }
        embedding_optimizer {
          learning_rate: 0.1
          rowwise_adagrad {}
        }
        table_precision: ROW_FP16
        table_precisions { key: "embedding_1" value: ROW_FP32 }
        mode: "sync"
        schedule { epochs: 1 batch_size: 8 }
      )pb",
      &job));
  absl::StatusOr<ModelDef> model = JobModel(job);
  ASSERT_TRUE(model.ok()) << model.status();
  *job.mutable_model_def() = *model;
  absl::StatusOr<VariablePlan> plan = PlanVariables(job, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<TableMemory> tables = TableMemoryOf(*plan, job, 2);
  ASSERT_EQ(tables.size(), 3u);
  for (const TableMemory& t : tables) {
    const bool fp32 = t.name() == "embedding_1";
    EXPECT_EQ(t.precision(), fp32 ? "fp32" : "fp16") << t.name();
    EXPECT_EQ(t.optimizer(), "rowwise_adagrad");
    EXPECT_EQ(t.slot_floats_per_row(), 1);
    EXPECT_EQ(t.bytes_per_row(), fp32 ? 68 : 36) << t.name();
    ASSERT_EQ(t.bytes_per_server_size(), 2);
    EXPECT_EQ(t.bytes_per_server(0) + t.bytes_per_server(1),
              1000 * t.bytes_per_row());
  }
  // Every shard of the fp16 tables is created fp16.
  for (const auto& requests : ShardRequestsByKind(*plan, job, 2)) {
    for (const CreateShardsRequest& r : requests) {
      for (const ShardDef& def : r.shards()) {
        const bool table = def.variable().rfind("embedding_", 0) == 0;
        EXPECT_EQ(def.precision(), table && def.variable() != "embedding_1"
                                       ? ROW_FP16
                                       : ROW_FP32)
            << def.name();
      }
    }
  }
}

}  // namespace
}  // namespace tessera
