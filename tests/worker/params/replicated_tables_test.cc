#include "worker/params/replicated_tables.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

VariableDef Table(const std::string& name, int64_t vocab, int64_t dim) {
  VariableDef v;
  v.name = name;
  v.shape = {vocab, dim};
  v.sparse = true;
  return v;
}

google::protobuf::Map<std::string, OptimizerConfig> Kept(
    const std::string& name) {
  google::protobuf::Map<std::string, OptimizerConfig> kept;
  kept[name].set_learning_rate(0.5f);
  kept[name].mutable_adagrad();
  return kept;
}

TEST(ReplicatedTables, KeepsTheNamedTablesWithTheirOptimizers) {
  absl::StatusOr<ReplicatedTables> kept =
      ReplicatedTables::Create({Table("a", 0, 2), Table("b", 3, 2)}, Kept("b"));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->holds(0));
  EXPECT_TRUE(kept->holds(1));
  EXPECT_EQ(kept->slot(1), 0);
  ASSERT_EQ(kept->variables().size(), 1u);
  EXPECT_EQ(kept->variables()[0].name, "b");
  ASSERT_TRUE(kept->variables()[0].update_rule.has_value());
  EXPECT_TRUE(kept->variables()[0].update_rule->has_adagrad());
}

TEST(ReplicatedTables, GathersRowsAndScattersTheirGradients) {
  absl::StatusOr<ReplicatedTables> kept =
      ReplicatedTables::Create({Table("b", 3, 2)}, Kept("b"));
  ASSERT_TRUE(kept.ok()) << kept.status();
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};
  std::vector<float> rows(4);
  ASSERT_TRUE(kept->Gather(0, {2, 0}, table, absl::MakeSpan(rows)).ok());
  EXPECT_THAT(rows, ElementsAre(20, 21, 0, 1));
  std::vector<float> gradient(6, 9.0f);  // last step's: overwritten
  std::vector<float> touched(3, 9.0f);
  kept->Scatter(0, {2, 0}, {1, 2, 3, 4}, absl::MakeSpan(gradient),
                absl::MakeSpan(touched));
  EXPECT_THAT(gradient, ElementsAre(3, 4, 0, 0, 1, 2));
  EXPECT_THAT(touched, ElementsAre(1, 0, 1));
  absl::Status outside = kept->Gather(0, {3}, table, absl::MakeSpan(rows));
  EXPECT_EQ(outside.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(outside.message(), HasSubstr("row 3 of table \"b\""));
}

TEST(ReplicatedTables, RefusesGrowingTablesAndUnknownNames) {
  absl::StatusOr<ReplicatedTables> growing =
      ReplicatedTables::Create({Table("a", 0, 2)}, Kept("a"));
  ASSERT_FALSE(growing.ok());
  EXPECT_THAT(growing.status().message(), HasSubstr("\"a\" grows"));
  absl::StatusOr<ReplicatedTables> unknown =
      ReplicatedTables::Create({Table("a", 4, 2)}, Kept("z"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("\"z\" is no table"));
}

}  // namespace
}  // namespace tessera
