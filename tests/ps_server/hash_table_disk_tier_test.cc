// Growing tables under a memory budget (issue #43 item 6): rows beyond it
// go to the disk tier and come back bit for bit; the rows in memory stay
// within the budget; checkpoints hold both tiers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/optimizer/optimizer.h"
#include "ps_server/hash_table.h"
#include "ps_server/row_memory_budget.h"
#include "ps_server/shard_checkpoint.h"
#include "ps_server/shard_store.h"
#include "tests/common/checkpoint/checkpoint_test_util.h"

namespace tessera {
namespace {

using testing_util::ScratchDir;

constexpr int64_t kDim = 8;

ShardDef TableDef(RowPrecision precision, int64_t evict_unseen = 0) {
  ShardDef def;
  def.set_name("big/part_0");
  def.set_variable("big");
  def.set_dtype(DT_FLOAT);
  def.set_hash_table(true);
  def.set_dim(kDim);
  def.set_precision(precision);
  def.set_evict_unseen_steps(evict_unseen);
  def.set_expected_rows(1);  // blocks of 16 rows: small tables spill
  Initializer* init = def.mutable_initializer();
  init->set_kind(Initializer::UNIFORM);
  init->set_minval(-0.05f);
  init->set_maxval(0.05f);
  init->set_seed(11);
  return def;
}

OptimizerConfig AdagradConfig() {
  OptimizerConfig config;
  config.set_learning_rate(0.05f);
  config.mutable_adagrad()->set_initial_accumulator_value(0.1f);
  return config;
}

OptimizerConfig AdamConfig() {
  OptimizerConfig config;
  config.set_learning_rate(0.01f);
  config.mutable_adam()->set_beta1(0.9f);
  config.mutable_adam()->set_beta2(0.999f);
  config.mutable_adam()->set_epsilon(1e-7f);
  return config;
}

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(config);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return optimizer.ok() ? *std::move(optimizer) : nullptr;
}

// A row as a checkpoint sees it: values and slots, as bytes.
std::map<int64_t, std::string> RowsOf(const HashTable& table) {
  std::map<int64_t, std::string> rows;
  const int64_t slot_floats =
      table.num_slots() == 0 ? 0 : table.slot_offset(table.num_slots());
  EXPECT_TRUE(table
                  .VisitRows([&](const HashTable::Rows& view) {
                    view.ForEach([&](const HashRowRef& row) {
                      std::string bytes(
                          reinterpret_cast<const char*>(row.values),
                          kDim * sizeof(float));
                      bytes.append(reinterpret_cast<const char*>(row.slots),
                                   slot_floats * sizeof(float));
                      EXPECT_TRUE(rows.emplace(row.id, bytes).second)
                          << "row " << row.id << " seen twice";
                    });
                    EXPECT_EQ(view.size(), static_cast<int64_t>(rows.size()));
                    return absl::OkStatus();
                  })
                  .ok());
  return rows;
}

// Skewed pushes and pulls over `ids` distinct ids: the same sequence for
// every table it is given.
void Train(HashTable& table, int64_t ids, int steps) {
  uint64_t state = 99;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  std::vector<int64_t> batch;
  std::vector<float> grads;
  std::vector<float> pulled;
  for (int step = 0; step < steps; ++step) {
    batch.clear();
    for (int k = 0; k < 256; ++k) {
      // Half the batch from a hot hundred, half from all ids.
      const int64_t id = k % 2 == 0 ? next() % 100 : next() % ids;
      if (std::find(batch.begin(), batch.end(), id) == batch.end()) {
        batch.push_back(id * 7919 + 3);
      }
    }
    pulled.resize(batch.size() * kDim);
    table.Read(batch, pulled.data());
    grads.resize(batch.size() * kDim);
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] = pulled[i] * 0.5f + static_cast<float>(next() % 1000) * 1e-4f;
    }
    table.Apply(batch, grads);
  }
}

class DiskTierTest : public ::testing::TestWithParam<RowPrecision> {
 protected:
  // Each its own folder, as each server has.
  std::shared_ptr<RowMemoryBudget> Budget(int64_t bytes) {
    return std::make_shared<RowMemoryBudget>(
        bytes, absl::StrCat(dir_.path(), "/tiers", budgets_++));
  }
  ScratchDir dir_;
  int budgets_ = 0;
};

TEST_P(DiskTierTest, SpillAndReloadKeepRowsAndSlotsBitForBit) {
  for (const OptimizerConfig& config : {AdagradConfig(), AdamConfig()}) {
    std::unique_ptr<Optimizer> optimizer = MakeOptimizer(config);
    absl::StatusOr<std::unique_ptr<HashTable>> in_memory =
        HashTable::Create(TableDef(GetParam()), optimizer.get());
    std::shared_ptr<RowMemoryBudget> budget = Budget(1 << 20);
    absl::StatusOr<std::unique_ptr<HashTable>> tiered =
        HashTable::Create(TableDef(GetParam()), optimizer.get(), budget);
    ASSERT_TRUE(in_memory.ok() && tiered.ok());
    Train(**in_memory, 30000, 200);
    Train(**tiered, 30000, 200);
    EXPECT_GT((*tiered)->spilled_rows(), 0);
    EXPECT_GT((*tiered)->reloaded_rows(), 0) << "no row came back";
    EXPECT_GT((*tiered)->disk_rows(), 0);
    EXPECT_EQ((*tiered)->total_rows(), (*in_memory)->rows());
    // Every row, in memory or on disk, with its slots, as without a budget.
    EXPECT_EQ(RowsOf(**tiered), RowsOf(**in_memory)) << optimizer->name();
    // Pulling them all brings them back the same.
    std::vector<int64_t> all;
    for (const auto& [id, bytes] : RowsOf(**in_memory)) all.push_back(id);
    std::vector<float> a(all.size() * kDim), b(all.size() * kDim);
    (*in_memory)->Read(all, a.data());
    (*tiered)->Read(all, b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  }
}

// A batch brings rows back and, under a budget far smaller than the
// batch, sends some of them out again before it is done with their stripe:
// the disk copies of rows brought back are deleted in one write per
// stripe, and that write must land before their new copies, not after.
TEST_P(DiskTierTest, RowsBroughtBackAndSentOutAgainInOneBatchKeepTheirCopy) {
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(AdagradConfig());
  absl::StatusOr<std::unique_ptr<HashTable>> in_memory =
      HashTable::Create(TableDef(GetParam()), optimizer.get());
  absl::StatusOr<std::unique_ptr<HashTable>> tiered =
      HashTable::Create(TableDef(GetParam()), optimizer.get(), Budget(1 << 20));
  ASSERT_TRUE(in_memory.ok() && tiered.ok());
  Train(**in_memory, 30000, 200);
  Train(**tiered, 30000, 200);
  std::vector<int64_t> all;
  for (const auto& [id, bytes] : RowsOf(**in_memory)) all.push_back(id);
  ASSERT_GT((*tiered)->disk_rows(), static_cast<int64_t>(all.size()) / 2);
  std::vector<float> a(all.size() * kDim), b(all.size() * kDim);
  for (int pass = 0; pass < 2; ++pass) {
    const int64_t reloaded = (*tiered)->reloaded_rows();
    const int64_t spilled = (*tiered)->spilled_rows();
    (*in_memory)->Read(all, a.data());
    (*tiered)->Read(all, b.data());
    // Most rows came back and most went out again, in this one batch.
    EXPECT_GT((*tiered)->reloaded_rows() - reloaded,
              static_cast<int64_t>(all.size()) / 2);
    EXPECT_GT((*tiered)->spilled_rows() - spilled,
              static_cast<int64_t>(all.size()) / 2);
    // A row whose new copy was deleted would come back as a new row.
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
        << "pass " << pass;
    EXPECT_EQ((*tiered)->total_rows(), (*in_memory)->rows()) << "pass " << pass;
  }
  EXPECT_EQ(RowsOf(**tiered), RowsOf(**in_memory));
}

TEST_P(DiskTierTest, IdsNeverSpilledDoNotReachTheDiskTier) {
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(AdagradConfig());
  absl::StatusOr<std::unique_ptr<HashTable>> table =
      HashTable::Create(TableDef(GetParam()), optimizer.get(), Budget(1 << 20));
  ASSERT_TRUE(table.ok());
  Train(**table, 30000, 200);
  ASSERT_GT((*table)->disk_rows(), 0);
  // New ids (Train's are id * 7919 + 3): created without a database
  // lookup, but for the filter's rare false positives.
  const int64_t before = (*table)->disk_lookups();
  std::vector<int64_t> fresh(2000);
  for (size_t k = 0; k < fresh.size(); ++k) fresh[k] = -1 - 2 * k;
  std::vector<float> rows(fresh.size() * kDim);
  (*table)->Read(fresh, rows.data());
  EXPECT_LT((*table)->disk_lookups() - before, 200);
  EXPECT_FALSE((*table)->Contains(-100001));
  // Ids that went to disk are still looked up: every row comes back.
  const int64_t reloaded = (*table)->reloaded_rows();
  std::vector<int64_t> trained(30000);
  for (size_t k = 0; k < trained.size(); ++k) trained[k] = k * 7919 + 3;
  rows.resize(trained.size() * kDim);
  const int64_t on_disk = (*table)->disk_rows();
  (*table)->Read(trained, rows.data());
  // (Some of the fresh rows went to disk too.)
  EXPECT_GE((*table)->reloaded_rows() - reloaded,
            on_disk - static_cast<int64_t>(fresh.size()));
}

TEST_P(DiskTierTest, RowsInMemoryStayWithinTheBudget) {
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(AdagradConfig());
  constexpr int64_t kBudget = 8 << 20;
  std::shared_ptr<RowMemoryBudget> budget = Budget(kBudget);
  absl::StatusOr<std::unique_ptr<HashTable>> table =
      HashTable::Create(TableDef(GetParam()), optimizer.get(), budget);
  ASSERT_TRUE(table.ok());
  // About 3x the budget in rows.
  const int64_t ids = 3 * kBudget / (*table)->record_bytes();
  std::vector<int64_t> batch(4096);
  std::vector<float> rows(batch.size() * kDim);
  for (int64_t first = 0; first < ids; first += batch.size()) {
    for (size_t k = 0; k < batch.size(); ++k) batch[k] = first + k;
    (*table)->Read(batch, rows.data());
    EXPECT_LE((*table)->resident_bytes(), kBudget * 115 / 100)
        << "after " << first << " rows";
  }
  EXPECT_LE(budget->used_bytes(), kBudget * 115 / 100);
  EXPECT_LE((*table)->rows() * (*table)->record_bytes(), kBudget);
  EXPECT_GE((*table)->total_rows(), ids);
  EXPECT_GT((*table)->disk_rows(), 2 * kBudget / (*table)->record_bytes());
  const std::string tier = (*table)->disk_directory();
  EXPECT_TRUE(std::filesystem::exists(tier));
  table->reset();
  EXPECT_EQ(budget->used_bytes(), budget->tier_memory_bytes());
  // The tier is a key range of the server's one database, which goes with
  // the server's budget.
  budget.reset();
  EXPECT_FALSE(std::filesystem::exists(tier)) << "the tier outlived its server";
}

// Each stripe a row lands in takes a block whatever the budget says; under
// a budget the blocks are small enough that DLRM's 26 tables (dim 64),
// every stripe of each holding rows, still fit (before: 64 blocks of 256
// rows a table, 225 MB).
TEST_P(DiskTierTest, ManyTablesWithRowsInEveryStripeStayWithinTheBudget) {
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(AdagradConfig());
  constexpr int64_t kBudget = 64 << 20;
  constexpr int64_t kWideDim = 64;
  std::shared_ptr<RowMemoryBudget> budget = Budget(kBudget);
  std::vector<std::unique_ptr<HashTable>> tables;
  std::vector<int64_t> batch(2048);
  std::vector<float> rows(batch.size() * kWideDim);
  for (int t = 0; t < 26; ++t) {
    ShardDef def = TableDef(GetParam());
    def.set_name(absl::StrCat("table", t, "/part_0"));
    def.set_variable(absl::StrCat("table", t));
    def.set_dim(kWideDim);
    def.set_expected_rows(0);  // a growing table of unknown size
    absl::StatusOr<std::unique_ptr<HashTable>> table =
        HashTable::Create(def, optimizer.get(), budget);
    ASSERT_TRUE(table.ok()) << table.status();
    for (size_t k = 0; k < batch.size(); ++k) batch[k] = t * 100000 + k;
    (*table)->Read(batch, rows.data());
    tables.push_back(*std::move(table));
  }
  int64_t resident = 0;
  for (const auto& table : tables) resident += table->resident_bytes();
  EXPECT_LE(resident, kBudget);
  EXPECT_LE(budget->used_bytes(), kBudget * 115 / 100);
}

TEST_P(DiskTierTest, RowsPushedOftenStayInMemoryPastRowsPushedOnce) {
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(AdagradConfig());
  // Half of it the tier's own memory (at least 4 MiB), half rows.
  absl::StatusOr<std::unique_ptr<HashTable>> table =
      HashTable::Create(TableDef(GetParam()), optimizer.get(), Budget(8 << 20));
  ASSERT_TRUE(table.ok());
  HashTable& t = **table;
  std::vector<int64_t> hot(256);
  for (size_t k = 0; k < hot.size(); ++k) hot[k] = -1 - static_cast<int64_t>(k);
  std::vector<float> rows(hot.size() * kDim);
  const std::vector<float> grads(hot.size() * kDim, 0.01f);
  for (int push = 0; push < 8; ++push) {
    t.Read(hot, rows.data());
    t.Apply(hot, grads);
  }
  // Then rows pushed once each until twice as many are on disk as in
  // memory: the hot rows are older than all of them (plain LRU would send
  // them first), but pushed 8 times, so they weigh an eighth of their age,
  // less than the oldest rows still in memory.
  std::vector<int64_t> batch(hot.size());
  for (int64_t first = 0; t.disk_rows() <= 2 * t.rows();
       first += batch.size()) {
    for (size_t k = 0; k < batch.size(); ++k) batch[k] = first + k;
    t.Read(batch, rows.data());
    t.Apply(batch, grads);
  }
  const int64_t reloaded = t.reloaded_rows();
  t.Read(hot, rows.data());
  EXPECT_EQ(t.reloaded_rows(), reloaded)
      << "rows pushed 8 times went to disk before rows pushed once since; "
      << t.rows() << " rows in memory, " << t.disk_rows() << " on disk";
  // The oldest of the rows pushed once did go.
  for (size_t k = 0; k < batch.size(); ++k) batch[k] = k;
  t.Read(batch, rows.data());
  EXPECT_EQ(t.reloaded_rows(), reloaded + static_cast<int64_t>(batch.size()));
}

TEST_P(DiskTierTest, EvictionSweepsRowsOnDiskToo) {
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(AdagradConfig());
  std::shared_ptr<RowMemoryBudget> budget = Budget(1 << 20);
  ShardDef def = TableDef(GetParam(), /*evict_unseen=*/20000);
  def.set_evict_interval_steps(1000000);  // sweeps only when asked
  absl::StatusOr<std::unique_ptr<HashTable>> table =
      HashTable::Create(def, optimizer.get(), budget);
  ASSERT_TRUE(table.ok());
  Train(**table, 30000, 100);
  ASSERT_GT((*table)->disk_rows(), 0);
  EXPECT_EQ((*table)->Evict(), 0);  // nothing is old enough yet
  // Keep pushing the hot rows only, past the unseen limit for the rest.
  std::vector<int64_t> hot = {3, 7922};
  std::vector<float> grads(hot.size() * kDim, 0.01f);
  const int64_t before = (*table)->total_rows();
  for (int step = 0; step < 20000; ++step) (*table)->Apply(hot, grads);
  const int64_t evicted = (*table)->Evict();
  EXPECT_EQ(evicted, before - 2);
  EXPECT_EQ((*table)->total_rows(), 2);
  EXPECT_EQ((*table)->disk_rows(), 0);
}

TEST_P(DiskTierTest, CheckpointHoldsRowsOnDiskAndRestoresThem) {
  const OptimizerConfig config = AdagradConfig();
  CreateShardsRequest request;
  *request.add_shards() = TableDef(GetParam());
  *request.mutable_optimizer() = config;
  ShardStore tiered(ShardStoreOptions{Budget(1 << 20)});
  CreateShardsResponse created;
  ASSERT_TRUE(tiered.Create(request, &created).ok());
  std::shared_ptr<HashTable> table = tiered.List()[0].table;
  Train(*table, 30000, 200);
  ASSERT_GT(table->disk_rows(), 0);
  const std::map<int64_t, std::string> trained = RowsOf(*table);

  const std::string dir = dir_.path() + "/ckpt";
  std::filesystem::create_directories(dir);
  SaveShardsResponse saved;
  ASSERT_TRUE(SaveShardCheckpoint(tiered, dir, 0, &saved).ok());
  CheckpointManifest manifest;
  manifest.set_num_ps(1);
  *manifest.add_files() = saved.file();
  for (const CheckpointVariable& v : saved.variables()) {
    *manifest.add_variables() = v;
  }
  EXPECT_EQ(manifest.variables(0).shards(0).shape().dims(0),
            static_cast<int64_t>(trained.size()));

  // Into a server with all rows in memory, and into another tiered one.
  ShardStore plain;
  ASSERT_TRUE(plain.Create(request, &created).ok());
  RestoreShardsResponse restored;
  ASSERT_TRUE(RestoreShardCheckpoint(manifest, dir, &plain, &restored).ok());
  EXPECT_EQ(RowsOf(*plain.List()[0].table), trained);

  ShardStore again(ShardStoreOptions{Budget(1 << 20)});
  ASSERT_TRUE(again.Create(request, &created).ok());
  ASSERT_TRUE(RestoreShardCheckpoint(manifest, dir, &again, &restored).ok());
  std::shared_ptr<HashTable> back = again.List()[0].table;
  EXPECT_GT(back->disk_rows(), 0) << "the restore did not spill";
  EXPECT_EQ(RowsOf(*back), trained);
  EXPECT_EQ(back->version(), table->version());
  // And both train on alike.
  Train(*back, 30000, 20);
  Train(*plain.List()[0].table, 30000, 20);
  EXPECT_EQ(RowsOf(*back), RowsOf(*plain.List()[0].table));
}

INSTANTIATE_TEST_SUITE_P(Precisions, DiskTierTest,
                         ::testing::Values(ROW_FP32, ROW_FP16),
                         [](const auto& info) {
                           return std::string(RowPrecision_Name(info.param));
                         });

}  // namespace
}  // namespace tessera
