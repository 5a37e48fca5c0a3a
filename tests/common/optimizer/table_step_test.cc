// ApplyTableStep: lazy updates move only the touched rows, dense ones the
// whole table as Keras does (issue #42, defect 2).

#include "common/optimizer/table_step.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tests/common/optimizer/optimizer_configs.h"

namespace tessera {
namespace {

using optimizer_test::AdamConfig;
using optimizer_test::MomentumConfig;
using optimizer_test::SgdConfig;

constexpr int64_t kRows = 4, kDim = 3;

std::unique_ptr<Optimizer> Create(OptimizerConfig config,
                                  TableUpdates updates) {
  config.set_table_updates(updates);
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(config);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return optimizer.ok() ? *std::move(optimizer) : nullptr;
}

// A table of kRows x kDim with its optimizer's slots.
struct Table {
  explicit Table(const Optimizer& optimizer) : values(kRows * kDim) {
    for (int64_t i = 0; i < kRows * kDim; ++i) values[i] = 0.1f * (i + 1);
    for (int k = 0; k < optimizer.num_slots(); ++k) {
      slots.emplace_back(values.size(), optimizer.slot_initial_value(k));
    }
    for (auto& s : slots) ptrs.push_back(s.data());
  }
  void Step(const Optimizer& optimizer, std::vector<int64_t> rows,
            std::vector<float> grads) {
    ApplyTableStep(optimizer, kRows, kDim, rows, grads, ++t, values.data(),
                   ptrs, &scratch);
  }
  std::vector<float> Row(int64_t r) const {
    return {values.begin() + r * kDim, values.begin() + (r + 1) * kDim};
  }
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
  std::vector<float*> ptrs;
  std::vector<float> scratch;
  int64_t t = 0;
};

TEST(TableStep, LazyAdamLeavesRowsTheStepDidNotTouch) {
  std::unique_ptr<Optimizer> adam =
      Create(AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f), TABLE_UPDATES_LAZY);
  Table table(*adam);
  table.Step(*adam, {1, 3}, {1, 2, 3, 4, 5, 6});
  const std::vector<float> row1 = table.Row(1);
  const std::vector<float> row0 = table.Row(0);
  const std::vector<float> row3 = table.Row(3);
  const std::vector<float> m1(table.slots[0].begin() + kDim,
                              table.slots[0].begin() + 2 * kDim);
  table.Step(*adam, {3}, {1, 1, 1});
  // Row 1 has moments, but lazy Adam moves only row 3 now.
  EXPECT_EQ(table.Row(1), row1);
  EXPECT_EQ(std::vector<float>(table.slots[0].begin() + kDim,
                               table.slots[0].begin() + 2 * kDim),
            m1);
  EXPECT_EQ(table.Row(0), row0);
  EXPECT_NE(table.Row(3), row3);
}

TEST(TableStep, DenseAdamMovesEveryRowAsTheWholeTableWould) {
  std::unique_ptr<Optimizer> adam =
      Create(AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f), TABLE_UPDATES_DENSE);
  Table table(*adam), whole(*adam);
  const std::vector<float> row0 = table.Row(0);
  table.Step(*adam, {3, 1}, {4, 5, 6, 1, 2, 3});
  table.Step(*adam, {3}, {1, 1, 1});
  // Keras: one Adam step of the whole table, zero where untouched.
  std::vector<float> g1(kRows * kDim, 0.0f), g2(kRows * kDim, 0.0f);
  for (int j = 0; j < kDim; ++j) {
    g1[1 * kDim + j] = 1.0f + j;
    g1[3 * kDim + j] = 4.0f + j;
    g2[3 * kDim + j] = 1.0f;
  }
  adam->Apply(whole.values.data(), g1.data(), whole.ptrs.data(), kRows * kDim,
              1);
  const std::vector<float> row1 = whole.Row(1);
  adam->Apply(whole.values.data(), g2.data(), whole.ptrs.data(), kRows * kDim,
              2);
  EXPECT_EQ(table.values, whole.values);
  EXPECT_EQ(table.slots, whole.slots);
  // Row 1's moments moved it in the second step, which did not touch it.
  EXPECT_NE(table.Row(1), row1);
  EXPECT_EQ(table.Row(0), row0);  // never touched: no moments yet
}

TEST(TableStep, MomentumDiffersByRuleAndSgdDoesNot) {
  for (const OptimizerConfig& config :
       {MomentumConfig(0.1f, 0.9f, false), SgdConfig(0.1f)}) {
    std::unique_ptr<Optimizer> lazy = Create(config, TABLE_UPDATES_LAZY);
    std::unique_ptr<Optimizer> dense = Create(config, TABLE_UPDATES_DENSE);
    Table a(*lazy), b(*dense);
    for (Table* t : {&a, &b}) {
      t->Step(t == &a ? *lazy : *dense, {0, 2}, {1, 1, 1, 2, 2, 2});
      t->Step(t == &a ? *lazy : *dense, {2}, {1, 1, 1});
    }
    if (config.has_momentum()) {
      EXPECT_NE(a.Row(0), b.Row(0)) << "momentum's velocity moves row 0";
    } else {
      EXPECT_EQ(a.values, b.values) << "a zero gradient changes nothing";
    }
  }
}

TEST(TableStep, CreateOptimizerRefusesAnUnknownRule) {
  OptimizerConfig config = SgdConfig(0.1f);
  config.set_table_updates(static_cast<TableUpdates>(7));
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(config);
  ASSERT_FALSE(optimizer.ok());
  EXPECT_THAT(optimizer.status().message(),
              ::testing::HasSubstr("optimizer.table_updates: 7"));
}

}  // namespace
}  // namespace tessera
