// A table trains the same sharded on the servers (ps_server/shard's row
// updates) as replicated on the workers (ReplicatedTables' scatter into a
// MirroredParameters replica, all-reduced), for Adam and momentum, lazy and
// dense (issue #42, defect 2: the replica stepped every row, the servers
// only the touched ones).

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"
#include "tests/common/optimizer/optimizer_configs.h"
#include "worker/params/mirrored_parameters.h"
#include "worker/params/replicated_tables.h"

namespace tessera {
namespace {

constexpr int64_t kVocab = 10, kDim = 3, kSplit = 6;  // shards [0,6) [6,10)

VariableDef Table() {
  VariableDef v;
  v.name = "emb";
  v.shape = {kVocab, kDim};
  v.sparse = true;
  v.initializer.set_kind(Initializer::UNIFORM);
  v.initializer.set_minval(-0.05f);
  v.initializer.set_maxval(0.05f);
  v.initializer.set_seed(11);
  return v;
}

ShardDef Part(int index, int64_t offset, int64_t rows) {
  const VariableDef table = Table();
  ShardDef def;
  def.set_name(absl::StrCat("emb/part_", index));
  def.set_variable("emb");
  def.set_index(index);
  def.set_dtype(DT_FLOAT);
  *def.mutable_initializer() = table.initializer;
  def.mutable_variable_shape()->add_dims(kVocab);
  def.mutable_variable_shape()->add_dims(kDim);
  def.set_row_offset(offset);
  def.mutable_shape()->add_dims(rows);
  def.mutable_shape()->add_dims(kDim);
  return def;
}

// Each step's rows (distinct, ascending) and gradient rows.
struct Step {
  std::vector<int64_t> rows;
  std::vector<float> grads;
};

std::vector<Step> Steps() {
  const std::vector<std::vector<int64_t>> rows = {
      {0, 7}, {1, 2, 7}, {9}, {0, 3, 4, 5}, {8}, {2, 7}, {6}, {1}};
  std::vector<Step> steps;
  float x = 0.3f;
  for (const auto& r : rows) {
    Step s{r, {}};
    for (size_t i = 0; i < r.size() * kDim; ++i) {
      x = x * 1.7f - static_cast<float>(static_cast<int>(x * 1.7f));
      s.grads.push_back(x - 0.5f);
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

// The table after Steps() on two server shards: every shard gets each
// step's push (its rows, maybe none), as in sync mode.
std::vector<float> Sharded(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(config);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  std::unique_ptr<Shard> a =
      *Shard::Create(Part(0, 0, kSplit), optimizer->get());
  std::unique_ptr<Shard> b =
      *Shard::Create(Part(1, kSplit, kVocab - kSplit), optimizer->get());
  for (const Step& s : Steps()) {
    std::vector<int64_t> rows_a, rows_b;
    std::vector<float> grads_a, grads_b;
    for (size_t i = 0; i < s.rows.size(); ++i) {
      const bool first = s.rows[i] < kSplit;
      (first ? rows_a : rows_b).push_back(s.rows[i] - (first ? 0 : kSplit));
      std::vector<float>& g = first ? grads_a : grads_b;
      g.insert(g.end(), s.grads.begin() + i * kDim,
               s.grads.begin() + (i + 1) * kDim);
    }
    a->ApplyRows(rows_a, grads_a);
    b->ApplyRows(rows_b, grads_b);
  }
  std::vector<float> values = a->CopyState().values;
  const std::vector<float> rest = b->CopyState().values;
  values.insert(values.end(), rest.begin(), rest.end());
  return values;
}

// The same steps on a worker's replica: scattered into the gradient
// buffer, the one replica's all-reduce being itself.
std::vector<float> Replicated(const OptimizerConfig& config) {
  google::protobuf::Map<std::string, OptimizerConfig> kept_tables;
  kept_tables["emb"] = config;
  absl::StatusOr<ReplicatedTables> kept =
      ReplicatedTables::Create({Table()}, kept_tables);
  EXPECT_TRUE(kept.ok()) << kept.status();
  OptimizerConfig dense = optimizer_test::SgdConfig(0.1f);
  absl::StatusOr<std::unique_ptr<MirroredParameters>> replica =
      MirroredParameters::Create(kept->variables(), dense);
  EXPECT_TRUE(replica.ok()) << replica.status();
  for (const Step& s : Steps()) {
    kept->Scatter(0, s.rows, s.grads, (*replica)->gradients()[0],
                  (*replica)->touched_rows(0));
    (*replica)->SetWeight(1.0);
    EXPECT_TRUE((*replica)->ApplyReduced().ok());
  }
  const absl::Span<const float> values = (*replica)->values()[0];
  return {values.begin(), values.end()};
}

OptimizerConfig Config(const std::string& kind, TableUpdates updates) {
  OptimizerConfig config =
      kind == "adam" ? optimizer_test::AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f)
                     : optimizer_test::MomentumConfig(0.1f, 0.9f, false);
  config.set_table_updates(updates);
  return config;
}

class TableUpdatesPlacementTest
    : public ::testing::TestWithParam<std::tuple<std::string, TableUpdates>> {};

TEST_P(TableUpdatesPlacementTest, ShardedAndReplicatedTablesTrainAlike) {
  const auto& [kind, updates] = GetParam();
  const OptimizerConfig config = Config(kind, updates);
  // The same floats in the same order: the same bits.
  EXPECT_EQ(Sharded(config), Replicated(config));
}

TEST_P(TableUpdatesPlacementTest, TheRuleChangesWhatATableLearns) {
  const auto& [kind, updates] = GetParam();
  const TableUpdates other =
      updates == TABLE_UPDATES_LAZY ? TABLE_UPDATES_DENSE : TABLE_UPDATES_LAZY;
  EXPECT_NE(Replicated(Config(kind, updates)), Replicated(Config(kind, other)));
  EXPECT_NE(Sharded(Config(kind, updates)), Sharded(Config(kind, other)));
}

INSTANTIATE_TEST_SUITE_P(
    OptimizersAndRules, TableUpdatesPlacementTest,
    ::testing::Combine(::testing::Values("adam", "momentum"),
                       ::testing::Values(TABLE_UPDATES_LAZY,
                                         TABLE_UPDATES_DENSE)),
    [](const ::testing::TestParamInfo<TableUpdatesPlacementTest::ParamType>&
           info) {
      return std::get<0>(info.param) +
             (std::get<1>(info.param) == TABLE_UPDATES_LAZY ? "_lazy"
                                                            : "_dense");
    });

}  // namespace
}  // namespace tessera
