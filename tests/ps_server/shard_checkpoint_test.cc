#include "ps_server/shard_checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "partitioners/hash_routing.h"
#include "ps_server/shard_store.h"
#include "tests/common/checkpoint/checkpoint_test_util.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::AdamConfig;
using ps_test::GlorotInit;
using ps_test::MakeShardDef;
using ps_test::MomentumConfig;
using ps_test::SgdConfig;
using ::testing::HasSubstr;
using testing_util::ReadWholeFile;
using testing_util::ScratchDir;
using testing_util::WriteWholeFile;

OptimizerConfig AdagradConfig(float learning_rate) {
  OptimizerConfig config;
  config.set_learning_rate(learning_rate);
  config.mutable_adagrad()->set_initial_accumulator_value(0.1f);
  return config;
}

OptimizerConfig FtrlConfig(float learning_rate) {
  OptimizerConfig config;
  config.set_learning_rate(learning_rate);
  config.mutable_ftrl()->set_l1(0.001f);
  config.mutable_ftrl()->set_l2(0.01f);
  return config;
}

// Parameter servers simulated by stores, with variables laid out as the
// coordinator does: "div" row ranges, shard i on server i % num_ps.
class Cluster {
 public:
  explicit Cluster(int num_ps) {
    for (int k = 0; k < num_ps; ++k) {
      stores_.push_back(std::make_unique<ShardStore>());
    }
  }

  int num_ps() const { return static_cast<int>(stores_.size()); }
  ShardStore& ps(int k) { return *stores_[k]; }

  void AddDense(const std::string& variable, int64_t rows, int64_t cols,
                int num_shards, const OptimizerConfig& optimizer,
                uint64_t seed = 7) {
    std::vector<CreateShardsRequest> requests(num_ps());
    int64_t offset = 0;
    for (int i = 0; i < num_shards; ++i) {
      const int64_t n = rows / num_shards + (i < rows % num_shards ? 1 : 0);
      *requests[i % num_ps()].add_shards() = MakeShardDef(
          variable, i, {rows, cols}, offset, n, GlorotInit(rows, cols, seed));
      offset += n;
    }
    Create(requests, optimizer);
  }

  void AddHash(const std::string& variable, int64_t dim, int num_shards,
               const OptimizerConfig& optimizer, int64_t evict_unseen = 0) {
    std::vector<CreateShardsRequest> requests(num_ps());
    for (int i = 0; i < num_shards; ++i) {
      ShardDef def =
          MakeShardDef(variable, i, {1000, dim}, 0, 1000, GlorotInit(4, 4, 3));
      def.set_hash_table(true);
      def.set_dim(dim);
      def.set_num_shards(num_shards);
      def.set_evict_unseen_steps(evict_unseen);
      *requests[i % num_ps()].add_shards() = def;
    }
    Create(requests, optimizer);
  }

  // Saves every server into `dir` as one checkpoint and returns its
  // manifest, merged as the coordinator merges the responses.
  CheckpointManifest Save(const std::string& dir) {
    CheckpointManifest manifest;
    manifest.set_global_step(42);
    manifest.set_num_ps(num_ps());
    std::map<std::string, CheckpointVariable*> by_name;
    for (int k = 0; k < num_ps(); ++k) {
      SaveShardsResponse response;
      absl::Status s = SaveShardCheckpoint(ps(k), dir, k, &response);
      EXPECT_TRUE(s.ok()) << s;
      *manifest.add_files() = response.file();
      for (const CheckpointVariable& v : response.variables()) {
        CheckpointVariable*& merged = by_name[v.name()];
        if (merged == nullptr) {
          merged = manifest.add_variables();
          *merged = v;
          continue;
        }
        for (const CheckpointShard& shard : v.shards()) {
          *merged->add_shards() = shard;
        }
      }
    }
    return manifest;
  }

  absl::Status Restore(const CheckpointManifest& manifest,
                       const std::string& dir) {
    for (int k = 0; k < num_ps(); ++k) {
      RestoreShardsResponse response;
      absl::Status s = RestoreShardCheckpoint(manifest, dir, &ps(k), &response);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Every dense shard of `variable`, over all servers, by row offset.
  std::vector<std::shared_ptr<Shard>> DenseShards(const std::string& variable) {
    std::vector<std::shared_ptr<Shard>> shards;
    for (auto& store : stores_) {
      for (const StoredShard& s : store->List()) {
        if (s.shard && s.def().variable() == variable) {
          shards.push_back(s.shard);
        }
      }
    }
    std::sort(shards.begin(), shards.end(), [](const auto& a, const auto& b) {
      return a->def().row_offset() < b->def().row_offset();
    });
    return shards;
  }

  std::vector<std::shared_ptr<HashTable>> Tables(const std::string& variable) {
    std::vector<std::shared_ptr<HashTable>> tables;
    for (auto& store : stores_) {
      for (const StoredShard& s : store->List()) {
        if (s.table && s.def().variable() == variable) {
          tables.push_back(s.table);
        }
      }
    }
    std::sort(tables.begin(), tables.end(), [](const auto& a, const auto& b) {
      return a->def().index() < b->def().index();
    });
    return tables;
  }

 private:
  void Create(const std::vector<CreateShardsRequest>& requests,
              const OptimizerConfig& optimizer) {
    for (int k = 0; k < num_ps(); ++k) {
      CreateShardsRequest request = requests[k];
      *request.mutable_optimizer() = optimizer;
      CreateShardsResponse response;
      absl::Status s = ps(k).Create(request, &response);
      ASSERT_TRUE(s.ok()) << s;
    }
  }

  std::vector<std::unique_ptr<ShardStore>> stores_;
};

// The whole variable's values and slots, concatenated over its shards.
struct FullState {
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
  std::vector<int64_t> updates;
};

FullState Full(Cluster& cluster, const std::string& variable) {
  FullState full;
  for (const auto& shard : cluster.DenseShards(variable)) {
    ShardState s = shard->CopyState();
    full.values.insert(full.values.end(), s.values.begin(), s.values.end());
    full.slots.resize(s.slots.size());
    for (size_t k = 0; k < s.slots.size(); ++k) {
      full.slots[k].insert(full.slots[k].end(), s.slots[k].begin(),
                           s.slots[k].end());
    }
    full.updates.push_back(s.updates);
  }
  return full;
}

// Equal to the bit (NaN-safe, and -0 differs from +0).
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void ExpectSameState(Cluster& a, Cluster& b, const std::string& variable) {
  FullState x = Full(a, variable);
  FullState y = Full(b, variable);
  EXPECT_TRUE(SameBits(x.values, y.values)) << variable << " values";
  ASSERT_EQ(x.slots.size(), y.slots.size());
  for (size_t k = 0; k < x.slots.size(); ++k) {
    EXPECT_TRUE(SameBits(x.slots[k], y.slots[k])) << variable << " slot " << k;
  }
}

std::vector<float> RandomGrad(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<float> grad(n);
  for (float& g : grad) g = dist(rng);
  return grad;
}

// Applies the same pseudo-random dense and row updates to every shard of
// `variable`, so twins stay in step.
void Train(Cluster& cluster, const std::string& variable, int steps,
           uint32_t seed) {
  for (const auto& shard : cluster.DenseShards(variable)) {
    for (int step = 0; step < steps; ++step) {
      const uint32_t s = seed + step * 131 + shard->def().index();
      shard->ApplyDense(RandomGrad(shard->num_elements(), s));
      std::vector<int64_t> rows = {0};
      if (shard->rows() > 1) rows.push_back(shard->rows() - 1);
      shard->ApplyRows(rows,
                       RandomGrad(rows.size() * shard->row_elements(), s + 1));
    }
  }
}

// Every row of a table: id -> values then slots.
std::map<int64_t, std::vector<float>> Rows(const HashTable& table) {
  std::map<int64_t, std::vector<float>> rows;
  const int64_t floats = table.row_elements() * (1 + table.num_slots());
  absl::Status s = table.VisitRows([&](const HashTable::Rows& view) {
    view.ForEach([&](const HashRowRef& row) {
      rows[row.id].assign(row.values, row.values + floats);
    });
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return rows;
}

std::map<int64_t, std::vector<float>> AllRows(Cluster& cluster,
                                              const std::string& variable) {
  std::map<int64_t, std::vector<float>> all;
  for (const auto& table : cluster.Tables(variable)) {
    for (auto& [id, row] : Rows(*table)) {
      EXPECT_TRUE(all.emplace(id, row).second) << "id " << id << " twice";
    }
  }
  return all;
}

// Pushes rows of ids [first, first + count) to the tables that own them.
void PushIds(Cluster& cluster, const std::string& variable, int64_t first,
             int64_t count, uint32_t seed) {
  auto tables = cluster.Tables(variable);
  const int n = static_cast<int>(tables.size());
  std::vector<std::vector<int64_t>> ids(n);
  for (int64_t id = first; id < first + count; ++id) {
    ids[n > 1 ? HashShardOf(id * 7919, n) : 0].push_back(id * 7919);
  }
  for (int k = 0; k < n; ++k) {
    const int64_t dim = tables[k]->row_elements();
    tables[k]->Apply(ids[k], RandomGrad(ids[k].size() * dim, seed + k));
  }
}

class DenseRoundTrip : public ::testing::TestWithParam<OptimizerConfig> {};

TEST_P(DenseRoundTrip, RestoredTwinStaysBitIdentical) {
  ScratchDir dir;
  Cluster a(2);
  a.AddDense("w", 11, 5, 3, GetParam());
  a.AddDense("b", 1, 1, 1, GetParam());  // one row
  Train(a, "w", 5, 1);
  Train(a, "b", 5, 2);
  const CheckpointManifest manifest = a.Save(dir.path());

  Cluster b(2);
  b.AddDense("w", 11, 5, 3, GetParam());
  b.AddDense("b", 1, 1, 1, GetParam());
  ASSERT_TRUE(b.Restore(manifest, dir.path()).ok());
  ExpectSameState(a, b, "w");
  ExpectSameState(a, b, "b");
  auto shards_a = a.DenseShards("w");
  auto shards_b = b.DenseShards("w");
  ASSERT_EQ(shards_a.size(), 3u);
  for (size_t i = 0; i < shards_a.size(); ++i) {
    EXPECT_EQ(shards_a[i]->version(), shards_b[i]->version());
    EXPECT_EQ(shards_a[i]->CopyState().updates,
              shards_b[i]->CopyState().updates);
  }
  // The next updates (Adam's bias correction depends on t) match too.
  Train(a, "w", 3, 99);
  Train(b, "w", 3, 99);
  ExpectSameState(a, b, "w");
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, DenseRoundTrip,
    ::testing::Values(SgdConfig(0.1f), MomentumConfig(0.05f, 0.9f, false),
                      MomentumConfig(0.05f, 0.9f, true),
                      AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f),
                      AdagradConfig(0.1f), FtrlConfig(0.1f)),
    [](const ::testing::TestParamInfo<OptimizerConfig>& info) {
      std::string name = OptimizerConfig::descriptor()
                             ->FindFieldByNumber(info.param.kind_case())
                             ->name();
      if (info.param.has_momentum() && info.param.momentum().nesterov()) {
        name += "_nesterov";
      }
      return name;
    });

TEST(ShardCheckpointTest, HashTableRoundTripKeepsRowsSlotsAndEviction) {
  ScratchDir dir;
  const OptimizerConfig adam = AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f);
  Cluster a(2);
  a.AddHash("emb", 4, 2, adam, /*evict_unseen=*/6);
  for (int step = 0; step < 4; ++step) PushIds(a, "emb", step * 10, 30, step);
  const CheckpointManifest manifest = a.Save(dir.path());
  const auto saved_rows = AllRows(a, "emb");
  ASSERT_EQ(saved_rows.size(), 60u);

  Cluster b(2);
  b.AddHash("emb", 4, 2, adam, 6);
  ASSERT_TRUE(b.Restore(manifest, dir.path()).ok());
  EXPECT_EQ(AllRows(b, "emb"), saved_rows);
  auto ta = a.Tables("emb");
  auto tb = b.Tables("emb");
  for (size_t k = 0; k < ta.size(); ++k) {
    EXPECT_EQ(ta[k]->version(), tb[k]->version());
    EXPECT_EQ(ta[k]->rows(), tb[k]->rows());
  }
  // Next pushes (LazyAdam's t is the table's step) and the eviction sweep
  // they trigger (rows unseen for 6 steps) agree.
  for (int step = 4; step < 14; ++step) {
    PushIds(a, "emb", 40, 5, 100 + step);
    PushIds(b, "emb", 40, 5, 100 + step);
  }
  const auto after = AllRows(a, "emb");
  EXPECT_LT(after.size(), saved_rows.size());  // something was evicted
  EXPECT_EQ(AllRows(b, "emb"), after);
}

TEST(ShardCheckpointTest, DenseReshardsThreeToTwoAndOneToFour) {
  const OptimizerConfig adam = AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f);
  ScratchDir dir3;
  Cluster three(3);
  three.AddDense("w", 17, 3, 3, adam);
  Train(three, "w", 4, 5);
  const CheckpointManifest m3 = three.Save(dir3.path());

  Cluster two(2);
  two.AddDense("w", 17, 3, 2, adam);
  ASSERT_TRUE(two.Restore(m3, dir3.path()).ok());
  ExpectSameState(three, two, "w");
  for (const auto& shard : two.DenseShards("w")) {
    EXPECT_EQ(shard->CopyState().updates, 8);  // 4 dense + 4 row pushes
  }

  ScratchDir dir1;
  Cluster one(1);
  one.AddDense("w", 17, 3, 1, adam);
  Train(one, "w", 4, 6);
  const CheckpointManifest m1 = one.Save(dir1.path());
  Cluster four(4);
  four.AddDense("w", 17, 3, 4, adam);
  ASSERT_TRUE(four.Restore(m1, dir1.path()).ok());
  ExpectSameState(one, four, "w");
}

TEST(ShardCheckpointTest, HashTableReshardsTwoToThreeKeepingEachIdOnce) {
  ScratchDir dir;
  const OptimizerConfig adagrad = AdagradConfig(0.1f);
  Cluster two(2);
  two.AddHash("emb", 3, 2, adagrad);
  for (int step = 0; step < 3; ++step) PushIds(two, "emb", step * 50, 80, step);
  const auto saved = AllRows(two, "emb");
  ASSERT_EQ(saved.size(), 180u);
  const CheckpointManifest manifest = two.Save(dir.path());

  Cluster three(3);
  three.AddHash("emb", 3, 3, adagrad);
  ASSERT_TRUE(three.Restore(manifest, dir.path()).ok());
  EXPECT_EQ(AllRows(three, "emb"), saved);  // AllRows fails on a repeat
  for (const auto& table : three.Tables("emb")) {
    for (const auto& [id, row] : Rows(*table)) {
      EXPECT_EQ(HashShardOf(id, 3), table->def().index()) << id;
    }
    // The step continues from the largest saved one.
    EXPECT_EQ(table->version(), 3);
  }
}

TEST(ShardCheckpointTest, CorruptFileIsDataLossNamingItAndChangesNothing) {
  ScratchDir dir;
  const OptimizerConfig sgd = SgdConfig(0.1f);
  Cluster a(2);
  a.AddDense("w", 8, 4, 2, sgd);
  a.AddHash("emb", 2, 2, sgd);
  Train(a, "w", 2, 3);
  PushIds(a, "emb", 0, 20, 1);
  const CheckpointManifest manifest = a.Save(dir.path());
  const std::string path = dir.path() + "/ps-1.shards";
  std::string bytes = ReadWholeFile(path);
  bytes[bytes.size() / 2] ^= 0x40;
  WriteWholeFile(path, bytes);

  // One server restoring every shard: ps-0.shards is fine, ps-1.shards is
  // not, and nothing may change.
  Cluster b(1);
  b.AddDense("w", 8, 4, 2, sgd);
  b.AddHash("emb", 2, 2, sgd);
  PushIds(b, "emb", 100, 3, 9);
  const FullState before = Full(b, "w");
  const auto rows_before = AllRows(b, "emb");
  absl::Status s = b.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps-1.shards"));
  EXPECT_TRUE(SameBits(Full(b, "w").values, before.values));
  EXPECT_EQ(AllRows(b, "emb"), rows_before);
}

TEST(ShardCheckpointTest, TruncatedOrForeignFileIsDataLoss) {
  ScratchDir dir;
  Cluster a(1);
  a.AddDense("w", 8, 4, 2, SgdConfig(0.1f));
  const CheckpointManifest manifest = a.Save(dir.path());
  const std::string path = dir.path() + "/ps-0.shards";
  const std::string bytes = ReadWholeFile(path);

  Cluster b(1);
  b.AddDense("w", 8, 4, 2, SgdConfig(0.1f));
  WriteWholeFile(path, bytes.substr(0, bytes.size() - 30));
  absl::Status s = b.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps-0.shards"));

  // A valid file that is not the one the manifest recorded.
  Train(a, "w", 1, 1);
  ScratchDir other;
  a.Save(other.path());
  WriteWholeFile(path, ReadWholeFile(other.path() + "/ps-0.shards"));
  s = b.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("manifest records"));
}

TEST(ShardCheckpointTest, ChangedOptimizerIsRefusedNamingTheSlot) {
  ScratchDir dir;
  Cluster sgd(1);
  sgd.AddDense("w", 6, 2, 1, SgdConfig(0.1f));
  const CheckpointManifest m_sgd = sgd.Save(dir.path());
  Cluster adam(1);
  adam.AddDense("w", 6, 2, 1, AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f));
  absl::Status s = adam.Restore(m_sgd, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("has no slot 'm' for variable w"));

  ScratchDir dir2;
  const CheckpointManifest m_adam = adam.Save(dir2.path());
  Cluster plain(1);
  plain.AddDense("w", 6, 2, 1, SgdConfig(0.1f));
  s = plain.Restore(m_adam, dir2.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("slot 'm' for variable w"));
}

TEST(ShardCheckpointTest, ChangedShapeKindOrMissingVariableIsRefused) {
  ScratchDir dir;
  Cluster a(1);
  a.AddDense("w", 6, 2, 1, SgdConfig(0.1f));
  a.AddHash("emb", 4, 1, SgdConfig(0.1f));
  const CheckpointManifest manifest = a.Save(dir.path());

  Cluster wider(1);
  wider.AddDense("w", 6, 3, 1, SgdConfig(0.1f));
  absl::Status s = wider.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("variable w"));
  EXPECT_THAT(s.message(), HasSubstr("[6,2] there but [6,3] here"));

  Cluster narrow_table(1);
  narrow_table.AddHash("emb", 3, 1, SgdConfig(0.1f));
  s = narrow_table.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("variable emb"));

  Cluster other(1);
  other.AddDense("v", 6, 2, 1, SgdConfig(0.1f));
  s = other.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("no variable v"));
}

// A file whose checksums are right but whose update count is not a count
// (here -1, which would make Adam's next step divide by zero) is damage.
TEST(ShardCheckpointTest, ImpossibleUpdateCountIsDataLoss) {
  ScratchDir dir;
  Cluster a(1);
  a.AddDense("w", 4, 2, 1, AdamConfig(0.1f, 0.9f, 0.999f, 1e-7f));
  std::shared_ptr<Shard> shard = a.DenseShards("w").at(0);
  ShardState state = shard->CopyState();
  state.updates = -1;
  ASSERT_TRUE(shard->RestoreState(state).ok());
  const CheckpointManifest manifest = a.Save(dir.path());

  Cluster b(1);
  b.AddDense("w", 4, 2, 1, AdamConfig(0.1f, 0.9f, 0.999f, 1e-7f));
  const ShardState before = b.DenseShards("w").at(0)->CopyState();
  absl::Status s = b.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("not a count"));
  EXPECT_EQ(b.DenseShards("w").at(0)->CopyState().values, before.values);
}

// Only the first dimension of a saved shard may differ from its variable's:
// [10,6,4] saved for a [10,4,6] variable has the right row size but
// scrambled rows.
TEST(ShardCheckpointTest, TransposedSavedShardIsRefused) {
  ScratchDir dir;
  Cluster b(1);
  CreateShardsRequest request;
  *request.add_shards() =
      MakeShardDef("t", 0, {10, 4, 6}, 0, 10, GlorotInit(40, 6, 1));
  *request.mutable_optimizer() = SgdConfig(0.1f);
  CreateShardsResponse created;
  ASSERT_TRUE(b.ps(0).Create(request, &created).ok());
  CheckpointManifest manifest = b.Save(dir.path());
  ASSERT_EQ(manifest.variables_size(), 1);
  TensorShape* saved =
      manifest.mutable_variables(0)->mutable_shards(0)->mutable_shape();
  saved->set_dims(1, 6);
  saved->set_dims(2, 4);
  absl::Status s = b.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("not a row range of the variable"));
}

TEST(ShardCheckpointTest, RowsTheCheckpointLacksAreNamed) {
  ScratchDir dir;
  Cluster a(2);
  a.AddDense("w", 10, 2, 2, SgdConfig(0.1f));
  CheckpointManifest manifest = a.Save(dir.path());
  // Drop saved shard 1 (rows [5, 10)) from the manifest.
  CheckpointVariable* w = manifest.mutable_variables(0);
  ASSERT_EQ(w->shards_size(), 2);
  for (int i = 0; i < w->shards_size(); ++i) {
    if (w->shards(i).index() == 1) {
      w->mutable_shards()->DeleteSubrange(i, 1);
      break;
    }
  }
  Cluster b(1);
  b.AddDense("w", 10, 2, 1, SgdConfig(0.1f));
  absl::Status s = b.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("no rows [5, 10) of variable w"));
}

TEST(ShardCheckpointTest, ManifestCannotNameFilesOutsideTheDirectory) {
  ScratchDir dir;
  Cluster a(1);
  a.AddDense("w", 4, 2, 1, SgdConfig(0.1f));
  CheckpointManifest manifest = a.Save(dir.path());
  manifest.mutable_files(0)->set_name("../ps-0.shards");
  absl::Status s = a.Restore(manifest, dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(ShardCheckpointTest, SaveDuringPushesSeesWholePushes) {
  // Every push adds -1 to every row (SGD, lr 1, gradient 1), so a
  // consistent save has every row at -step; a push applied to some
  // stripes only would show two values.
  ScratchDir dir;
  Cluster a(1);
  a.AddHash("emb", 2, 1, SgdConfig(1.0f));
  a.AddDense("w", 64, 8, 1, SgdConfig(1.0f));
  auto table = a.Tables("emb")[0];
  auto shard = a.DenseShards("w")[0];
  std::vector<int64_t> ids(2000);
  for (int64_t i = 0; i < 2000; ++i) ids[i] = i * 31;
  table->Apply(ids, std::vector<float>(ids.size() * 2, 0.0f));  // make rows
  std::atomic<bool> stop{false};
  std::thread pusher;
  // Stops the pusher however the test ends (an ASSERT returns early).
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } joiner{stop, pusher};
  pusher = std::thread([&] {
    const std::vector<float> ones(ids.size() * 2, 1.0f);
    const std::vector<float> dense_ones(shard->num_elements(), 1.0f);
    while (!stop.load()) {
      table->Apply(ids, ones);
      shard->ApplyDense(dense_ones);
    }
  });
  for (int round = 0; round < 5; ++round) {
    ScratchDir d;
    const CheckpointManifest manifest = a.Save(d.path());
    Cluster b(1);
    b.AddHash("emb", 2, 1, SgdConfig(1.0f));
    b.AddDense("w", 64, 8, 1, SgdConfig(1.0f));
    ASSERT_TRUE(b.Restore(manifest, d.path()).ok());
    const auto rows = AllRows(b, "emb");
    ASSERT_EQ(rows.size(), ids.size());
    // The first push (of zeros) was step 1.
    const float steps = static_cast<float>(b.Tables("emb")[0]->version() - 1);
    std::vector<float> initial_row(2);
    for (const auto& [id, row] : rows) {
      HashRowInitialValues(table->def().initializer(), id,
                           absl::MakeSpan(initial_row));
      ASSERT_NEAR(row[0] - initial_row[0], -steps, 0.01)
          << "id " << id << ": a push was saved half-applied";
    }
    const ShardState dense = b.DenseShards("w")[0]->CopyState();
    const std::vector<float> initial =
        ps_test::InitialValues(a.DenseShards("w")[0]->def());
    for (size_t i = 0; i < dense.values.size(); ++i) {
      ASSERT_NEAR(dense.values[i] - initial[i],
                  -static_cast<float>(dense.updates), 0.01);
    }
  }
}

}  // namespace
}  // namespace tessera
