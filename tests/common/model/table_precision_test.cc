#include "common/model/table_precision.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

JobConfig ParseJob(const std::string& text) {
  JobConfig job;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &job))
      << text;
  return job;
}

VariableDef Table(const std::string& name) {
  VariableDef v;
  v.name = name;
  v.shape = {0, 8};
  v.sparse = true;
  return v;
}

VariableDef Dense(const std::string& name) {
  VariableDef v;
  v.name = name;
  v.shape = {8, 1};
  return v;
}

TEST(TablePrecisionTest, PerTableThenJobWide) {
  const JobConfig job = ParseJob(R"pb(
    table_precision: ROW_BF16
    table_precisions { key: "a" value: ROW_FP16 }
  )pb");
  EXPECT_EQ(TablePrecisionOf(job, "a"), ROW_FP16);
  EXPECT_EQ(TablePrecisionOf(job, "b"), ROW_BF16);
  EXPECT_EQ(TablePrecisionOf(JobConfig(), "a"), ROW_FP32);
  EXPECT_TRUE(CheckTablePrecisions(job, {Table("a"), Table("b")}, {}).ok());
}

TEST(TablePrecisionTest, UnknownTableIsRefusedNamingTheTables) {
  const JobConfig job =
      ParseJob(R"pb(table_precisions { key: "dense" value: ROW_FP16 })pb");
  const absl::Status s =
      CheckTablePrecisions(job, {Table("emb"), Dense("dense")}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("\"dense\" is not an embedding table"));
  EXPECT_THAT(s.message(), HasSubstr("tables: emb"));
}

// Row gradients travel in a table's own precision unless the job says
// otherwise, per table first, then job-wide.
TEST(TablePrecisionTest, RowGradientsPerTableThenJobWideThenTheTables) {
  const JobConfig own = ParseJob(R"pb(
    table_precision: ROW_BF16
    table_precisions { key: "a" value: ROW_FP16 }
  )pb");
  EXPECT_EQ(RowGradientPrecisionOf(own, "a"), ROW_FP16);
  EXPECT_EQ(RowGradientPrecisionOf(own, "b"), ROW_BF16);
  EXPECT_EQ(RowGradientPrecisionOf(JobConfig(), "a"), ROW_FP32);
  const JobConfig set = ParseJob(R"pb(
    table_precision: ROW_BF16
    row_gradient_precision: ROW_FP32
    row_gradient_precisions { key: "a" value: ROW_FP16 }
  )pb");
  EXPECT_EQ(RowGradientPrecisionOf(set, "a"), ROW_FP16);
  EXPECT_EQ(RowGradientPrecisionOf(set, "b"), ROW_FP32);
  EXPECT_TRUE(CheckTablePrecisions(set, {Table("a"), Table("b")}, {}).ok());
}

TEST(TablePrecisionTest, RowGradientPrecisionOfAnUnknownTableIsRefused) {
  const JobConfig job = ParseJob(
      R"pb(row_gradient_precisions { key: "nope" value: ROW_FP16 })pb");
  const absl::Status s = CheckTablePrecisions(job, {Table("emb")}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("row_gradient_precisions: \"nope\" is not an "
                        "embedding table"));
}

TEST(TablePrecisionTest, ReplicatedTablesStayFp32) {
  const JobConfig job = ParseJob("table_precision: ROW_FP16");
  const absl::Status s = CheckTablePrecisions(job, {Table("emb")}, {"emb"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("replicated"));
  EXPECT_THAT(s.message(), HasSubstr("fp16"));
  EXPECT_TRUE(CheckTablePrecisions(JobConfig(), {Table("emb")}, {"emb"}).ok());
}

TEST(TablePrecisionTest, RowWiseOptimizersTrainTablesOnly) {
  const JobConfig tables_only = ParseJob(R"pb(
    optimizer { adam {} }
    embedding_optimizer { rowwise_adagrad {} }
  )pb");
  EXPECT_TRUE(
      CheckRowWiseOptimizers(tables_only, {Table("emb"), Dense("dense")}, {})
          .ok());
  const JobConfig everything = ParseJob("optimizer { rowwise_adagrad {} }");
  absl::Status s =
      CheckRowWiseOptimizers(everything, {Table("emb"), Dense("dense")}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dense variable \"dense\""));
  s = CheckRowWiseOptimizers(tables_only, {Table("emb")}, {"emb"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("replicated"));
}

}  // namespace
}  // namespace tessera
