#include "ps_server/embedded/embedded_shards.h"

#include <string>
#include <vector>

#include "common/checkpoint/checkpoint_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/restore/variable_restore.h"
#include "tests/common/checkpoint/checkpoint_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

OptimizerConfig Sgd(float learning_rate) {
  OptimizerConfig config;
  config.set_learning_rate(learning_rate);
  config.mutable_sgd();
  return config;
}

VariableDef Variable(const std::string& name, std::vector<int64_t> shape,
                     bool sparse, float initial) {
  VariableDef v;
  v.name = name;
  v.shape = std::move(shape);
  v.sparse = sparse;
  v.initializer.set_kind(Initializer::CONSTANT);
  v.initializer.set_value(initial);
  return v;
}

TEST(EmbeddedShardsTest, DenseUpdatesAreSavedAsOneServersCheckpoint) {
  EmbeddedShards shards;
  const VariableDef w = Variable("w", {2, 3}, false, 0);
  absl::StatusOr<int> index = shards.Add(w, Sgd(0.5f));
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(*index, 0);
  ASSERT_EQ(shards.num_elements(0), 6);
  ASSERT_TRUE(shards.SetValues(0, {1, 2, 3, 4, 5, 6}).ok());
  shards.ApplyGradient(0, {1, 1, 1, 1, 1, 1});
  std::vector<float> values(6);
  shards.ReadValues(0, absl::MakeSpan(values));
  EXPECT_THAT(values, ElementsAre(0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f));

  testing_util::ScratchDir root;
  JobConfig job;
  *job.mutable_optimizer() = Sgd(0.5f);
  absl::StatusOr<std::string> folder =
      shards.SaveCheckpoint(job, root.path(), 7, 2);
  ASSERT_TRUE(folder.ok()) << folder.status();
  absl::StatusOr<ValidCheckpoint> saved =
      CheckpointDir(root.path()).LatestValid();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->path, *folder);
  EXPECT_EQ(saved->manifest.global_step(), 7);
  EXPECT_EQ(saved->manifest.epoch(), 2);
  EXPECT_EQ(saved->manifest.num_ps(), 1);
  absl::StatusOr<std::vector<RestoredVariable>> restored = RestoreVariables(
      saved->manifest, saved->path, {VariableToRestore{w, Sgd(0.5f)}});
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_EQ(restored->size(), 1u);
  EXPECT_EQ((*restored)[0].values, values);
}

TEST(EmbeddedShardsTest, TablesAreReadAndUpdatedByRows) {
  EmbeddedShards shards;
  ASSERT_TRUE(shards.Add(Variable("w", {1}, false, 0), Sgd(1)).ok());
  absl::StatusOr<int> table =
      shards.Add(Variable("table", {4, 2}, true, 1), Sgd(1));
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(*table, 1);
  EXPECT_EQ(shards.row_elements(1), 2);
  EXPECT_FALSE(shards.CheckIds(1, {9}).ok());
  ASSERT_TRUE(shards.CheckIds(1, {1, 3}).ok());
  shards.ApplyRows(1, {3}, {1, 0.5f});
  std::vector<float> rows(4);
  shards.ReadRows(1, {1, 3}, rows.data());
  EXPECT_THAT(rows, ElementsAre(1, 1, 0, 0.5f));
}

TEST(EmbeddedShardsTest, ValuesOfAnotherSizeOrOfAGrowingTableAreRefused) {
  EmbeddedShards shards;
  ASSERT_TRUE(shards.Add(Variable("w", {2}, false, 3), Sgd(1)).ok());
  ASSERT_TRUE(shards.Add(Variable("grows", {0, 2}, true, 0), Sgd(1)).ok());
  absl::Status wrong_size = shards.SetValues(0, {1, 2, 3});
  EXPECT_EQ(wrong_size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_size.message(), HasSubstr("w"));
  std::vector<float> values(2);
  shards.ReadValues(0, absl::MakeSpan(values));
  EXPECT_THAT(values, ElementsAre(3, 3));
  absl::Status growing = shards.SetValues(1, {1, 2});
  EXPECT_EQ(growing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(growing.message(), HasSubstr("grows"));
}

}  // namespace
}  // namespace tessera
