// fp16/bf16 tables on the servers (fixed shards and growing hash tables),
// row-wise Adagrad's one slot float per row, and checkpoints converting
// between precisions on restore.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_file.h"
#include "common/optimizer/row_precision.h"
#include "ps_server/hash_table.h"
#include "ps_server/restore/variable_restore.h"
#include "ps_server/shard.h"
#include "ps_server/shard_checkpoint.h"
#include "ps_server/shard_store.h"
#include "tests/common/checkpoint/checkpoint_test_util.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

// The bits of widened values: a 2-byte value widens to exactly one float,
// so equal bits here are equal stored bits (EXPECT_EQ on floats would
// take -0 for +0).
std::vector<uint32_t> WidenedBits(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

using ps_test::GlorotInit;
using ps_test::MakeShardDef;
using testing_util::ScratchDir;

OptimizerConfig RowwiseConfig() {
  OptimizerConfig config;
  config.set_learning_rate(0.05f);
  config.mutable_rowwise_adagrad();
  return config;
}

OptimizerConfig AdagradConfig() {
  OptimizerConfig config;
  config.set_learning_rate(0.05f);
  config.mutable_adagrad();
  return config;
}

std::unique_ptr<Optimizer> Make(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> o = CreateOptimizer(config);
  EXPECT_TRUE(o.ok()) << o.status();
  return *std::move(o);
}

ShardDef HashDef(int64_t dim, RowPrecision precision) {
  ShardDef def = MakeShardDef("emb", 0, {0, dim}, 0, 0, GlorotInit(4, 4, 3));
  def.set_hash_table(true);
  def.set_dim(dim);
  def.set_num_shards(1);
  def.set_precision(precision);
  return def;
}

ShardDef FixedDef(int64_t rows, int64_t dim, RowPrecision precision) {
  ShardDef def =
      MakeShardDef("emb", 0, {rows, dim}, 0, rows, GlorotInit(rows, dim, 5));
  def.set_precision(precision);
  return def;
}

std::vector<float> Grads(int rows, int dim, int step) {
  std::vector<float> g(rows * dim);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * std::sin(step + 0.3 * i);
  return g;
}

TEST(TablePrecisionTest, HashRecordsShrink) {
  auto adagrad = Make(AdagradConfig());
  auto rowwise = Make(RowwiseConfig());
  auto fp32 = HashTable::Create(HashDef(64, ROW_FP32), adagrad.get());
  auto fp16 = HashTable::Create(HashDef(64, ROW_FP16), rowwise.get());
  ASSERT_TRUE(fp32.ok() && fp16.ok());
  EXPECT_EQ((*fp32)->record_bytes(), 8 + 64 * 4 * 2);
  EXPECT_EQ((*fp16)->record_bytes(), 8 + 64 * 2 + 4 + 4);  // padded to 8
  EXPECT_EQ((*fp16)->slot_row_elements(0), 1);
  auto odd = HashTable::Create(HashDef(3, ROW_BF16), rowwise.get());
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ((*odd)->record_bytes(), 8 + 8 + 4 + 4);
}

// A narrow row is the fp32 update of its widened value, rounded with the
// seed of (table, step, id): recomputed here from the pieces.
TEST(TablePrecisionTest, HashApplyRoundsTheFp32Update) {
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    auto rowwise = Make(RowwiseConfig());
    const ShardDef def = HashDef(8, p);
    auto table = HashTable::Create(def, rowwise.get());
    ASSERT_TRUE(table.ok());
    const std::vector<int64_t> ids = {5, 1234567};
    std::vector<float> before(16), after(16);
    (*table)->Read(ids, before.data());
    const std::vector<float> g = Grads(2, 8, 1);
    (*table)->Apply(ids, g);
    (*table)->Read(ids, after.data());
    const uint64_t seed =
        RowTableSeed(def.variable(), def.initializer().seed());
    for (int r = 0; r < 2; ++r) {
      std::vector<float> w(before.begin() + r * 8, before.begin() + r * 8 + 8);
      float acc = 0;
      float* slots[] = {&acc};
      rowwise->Apply(w.data(), g.data() + r * 8, slots, 8, 1);
      std::vector<uint16_t> stored(8);
      NarrowRowStochastic(p, w.data(), stored.data(), 8,
                          RowRoundingSeed(seed, 1, ids[r]));
      std::vector<float> expect(8);
      WidenRow(p, stored.data(), expect.data(), 8);
      for (int j = 0; j < 8; ++j) {
        EXPECT_EQ(after[r * 8 + j], expect[j]) << RowPrecisionName(p);
      }
    }
  }
}

// Two servers given the same pushes hold the same bits (sync mode's
// bit-identity), and the values moved.
TEST(TablePrecisionTest, NarrowTablesAreDeterministic) {
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    auto rowwise = Make(RowwiseConfig());
    auto a = HashTable::Create(HashDef(16, p), rowwise.get());
    auto b = HashTable::Create(HashDef(16, p), rowwise.get());
    auto fa = Shard::Create(FixedDef(50, 16, p), rowwise.get());
    auto fb = Shard::Create(FixedDef(50, 16, p), rowwise.get());
    ASSERT_TRUE(a.ok() && b.ok() && fa.ok() && fb.ok());
    const std::vector<int64_t> ids = {3, 7, 11, 42};
    std::vector<float> start(4 * 16);
    (*a)->Read(ids, start.data());
    for (int step = 1; step <= 30; ++step) {
      const std::vector<float> g = Grads(4, 16, step);
      (*a)->Apply(ids, g);
      (*b)->Apply(ids, g);
      (*fa)->ApplyRows(ids, g);
      (*fb)->ApplyRows(ids, g);
    }
    std::vector<float> va(4 * 16), vb(4 * 16);
    (*a)->Read(ids, va.data());
    (*b)->Read(ids, vb.data());
    EXPECT_EQ(va, vb);
    EXPECT_NE(va, start);
    const ShardState sa = (*fa)->CopyState(), sb = (*fb)->CopyState();
    EXPECT_EQ(sa.values, sb.values);
    EXPECT_EQ(sa.slots, sb.slots);
    ASSERT_EQ(sa.slots.size(), 1u);
    EXPECT_EQ(sa.slots[0].size(), 50u);  // one accumulator per row
    EXPECT_GT(sa.slots[0][3], 0.0f);
    EXPECT_EQ(sa.slots[0][4], 0.0f);
  }
}

TEST(TablePrecisionTest, FixedShardStoresHalfTheBytes) {
  auto rowwise = Make(RowwiseConfig());
  auto adagrad = Make(AdagradConfig());
  auto fp32 = Shard::Create(FixedDef(100, 64, ROW_FP32), adagrad.get());
  auto fp16 = Shard::Create(FixedDef(100, 64, ROW_FP16), rowwise.get());
  ASSERT_TRUE(fp32.ok() && fp16.ok());
  EXPECT_EQ((*fp32)->resident_bytes(), 100 * 64 * 4 * 2);
  EXPECT_EQ((*fp16)->resident_bytes(), 100 * 64 * 2 + 100 * 4);
  // Pulls still carry fp32, the stored values widened.
  EXPECT_EQ((*fp16)->byte_size(), 100 * 64 * 4);
  std::vector<float> whole(100 * 64), row(64);
  (*fp16)->ReadBytes(0, (*fp16)->byte_size(),
                     reinterpret_cast<char*>(whole.data()));
  const std::vector<int64_t> rows = {7};
  (*fp16)->ReadRows(rows, row.data());
  for (int j = 0; j < 64; ++j) EXPECT_EQ(row[j], whole[7 * 64 + j]);
  // A dense push of a table steps each row with the row-wise rule.
  const std::vector<float> g = Grads(100, 64, 2);
  (*fp16)->ApplyDense(g);
  EXPECT_GT((*fp16)->CopyState().slots[0][99], 0.0f);
}

// Parameter servers simulated by stores, as shard_checkpoint_test's.
class Servers {
 public:
  explicit Servers(int n) {
    for (int k = 0; k < n; ++k)
      stores_.push_back(std::make_unique<ShardStore>());
  }
  ShardStore& ps(int k) { return *stores_[k]; }

  void AddFixed(int64_t rows, int64_t dim, int shards, RowPrecision p,
                const OptimizerConfig& optimizer) {
    std::vector<CreateShardsRequest> requests(stores_.size());
    int64_t offset = 0;
    for (int i = 0; i < shards; ++i) {
      const int64_t n = rows / shards + (i < rows % shards ? 1 : 0);
      ShardDef def = MakeShardDef("emb", i, {rows, dim}, offset, n,
                                  GlorotInit(rows, dim, 5));
      def.set_precision(p);
      *requests[i % stores_.size()].add_shards() = def;
      offset += n;
    }
    Create(requests, optimizer);
  }

  void AddHash(int64_t dim, RowPrecision p, const OptimizerConfig& optimizer) {
    std::vector<CreateShardsRequest> requests(stores_.size());
    for (size_t i = 0; i < stores_.size(); ++i) {
      ShardDef def =
          MakeShardDef("ids", i, {0, dim}, 0, 0, GlorotInit(4, 4, 3));
      def.set_hash_table(true);
      def.set_dim(dim);
      def.set_num_shards(static_cast<int>(stores_.size()));
      def.set_precision(p);
      *requests[i].add_shards() = def;
    }
    Create(requests, optimizer);
  }

  CheckpointManifest Save(const std::string& dir) {
    CheckpointManifest manifest;
    manifest.set_global_step(1);
    manifest.set_num_ps(static_cast<int>(stores_.size()));
    std::map<std::string, CheckpointVariable*> by_name;
    for (size_t k = 0; k < stores_.size(); ++k) {
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
    for (size_t k = 0; k < stores_.size(); ++k) {
      RestoreShardsResponse response;
      absl::Status s = RestoreShardCheckpoint(manifest, dir, &ps(k), &response);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // The rows `ids` of "emb" (fixed) or "ids" (hash), as pulls return them.
  std::vector<float> Rows(const std::string& variable,
                          const std::vector<int64_t>& ids, int64_t dim) {
    std::vector<float> out(ids.size() * dim);
    for (size_t i = 0; i < ids.size(); ++i) {
      for (auto& store : stores_) {
        for (const StoredShard& s : store->List()) {
          if (s.def().variable() != variable) continue;
          absl::StatusOr<std::shared_ptr<RowTable>> rows =
              store->FindRows(s.def().name());
          if (!rows.ok()) continue;
          const std::vector<int64_t> one = {ids[i]};
          if (!(*rows)->CheckIds(one).ok()) continue;
          (*rows)->Read(one, out.data() + i * dim);
        }
      }
    }
    return out;
  }

  void Push(const std::string& variable, const std::vector<int64_t>& ids,
            const std::vector<float>& grads, int64_t dim) {
    for (size_t i = 0; i < ids.size(); ++i) {
      for (auto& store : stores_) {
        for (const StoredShard& s : store->List()) {
          if (s.def().variable() != variable) continue;
          absl::StatusOr<std::shared_ptr<RowTable>> rows =
              store->FindRows(s.def().name());
          if (!rows.ok()) continue;
          const std::vector<int64_t> one = {ids[i]};
          if (!(*rows)->CheckIds(one).ok()) continue;
          (*rows)->Apply(one, absl::MakeConstSpan(grads.data() + i * dim, dim));
        }
      }
    }
  }

  // The same as one push per shard (the ids routed to it together), as a
  // worker's push reaches every shard: the shards' steps stay equal.
  void PushBatch(const std::string& variable, const std::vector<int64_t>& ids,
                 const std::vector<float>& grads, int64_t dim) {
    for (auto& store : stores_) {
      for (const StoredShard& s : store->List()) {
        if (s.def().variable() != variable) continue;
        absl::StatusOr<std::shared_ptr<RowTable>> rows =
            store->FindRows(s.def().name());
        if (!rows.ok()) continue;
        std::vector<int64_t> mine;
        std::vector<float> mine_grads;
        for (size_t i = 0; i < ids.size(); ++i) {
          const std::vector<int64_t> one = {ids[i]};
          if (!(*rows)->CheckIds(one).ok()) continue;
          mine.push_back(ids[i]);
          mine_grads.insert(mine_grads.end(), grads.begin() + i * dim,
                            grads.begin() + (i + 1) * dim);
        }
        if (!mine.empty()) (*rows)->Apply(mine, mine_grads);
      }
    }
  }

 private:
  void Create(const std::vector<CreateShardsRequest>& requests,
              const OptimizerConfig& optimizer) {
    for (size_t k = 0; k < stores_.size(); ++k) {
      CreateShardsRequest request = requests[k];
      if (request.shards_size() == 0) continue;
      *request.mutable_optimizer() = optimizer;
      CreateShardsResponse response;
      absl::Status s = ps(k).Create(request, &response);
      ASSERT_TRUE(s.ok()) << s;
    }
  }

  std::vector<std::unique_ptr<ShardStore>> stores_;
};

std::vector<float> Narrowed(RowPrecision p, const std::vector<float>& v) {
  std::vector<uint16_t> stored(v.size());
  NarrowRowNearest(p, v.data(), stored.data(), v.size());
  std::vector<float> out(v.size());
  WidenRow(p, stored.data(), out.data(), v.size());
  return out;
}

// fp32 -> fp16/bf16 rounds to nearest; back to fp32 and between equal
// precisions keeps every bit; re-sharded (3 shards on 2 servers into 2 on
// 3) on the way, slots included.
TEST(TablePrecisionTest, RestoreConvertsBetweenPrecisions) {
  const std::vector<int64_t> fixed_ids = {0, 17, 33, 59};
  const std::vector<int64_t> hash_ids = {5, 77, 123456789, -4};
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    ScratchDir dir_a, dir_b;
    Servers fp32(2);
    fp32.AddFixed(60, 8, 3, ROW_FP32, RowwiseConfig());
    fp32.AddHash(8, ROW_FP32, RowwiseConfig());
    for (int step = 1; step <= 3; ++step) {
      fp32.Push("emb", fixed_ids, Grads(4, 8, step), 8);
      fp32.Push("ids", hash_ids, Grads(4, 8, step), 8);
    }
    const std::vector<float> fixed32 = fp32.Rows("emb", fixed_ids, 8);
    const std::vector<float> hash32 = fp32.Rows("ids", hash_ids, 8);
    const CheckpointManifest saved32 = fp32.Save(dir_a.path());

    Servers narrow(3);
    narrow.AddFixed(60, 8, 2, p, RowwiseConfig());
    narrow.AddHash(8, p, RowwiseConfig());
    absl::Status s = narrow.Restore(saved32, dir_a.path());
    ASSERT_TRUE(s.ok()) << s;
    const std::vector<float> fixed_n = narrow.Rows("emb", fixed_ids, 8);
    const std::vector<float> hash_n = narrow.Rows("ids", hash_ids, 8);
    EXPECT_EQ(fixed_n, Narrowed(p, fixed32)) << RowPrecisionName(p);
    EXPECT_EQ(hash_n, Narrowed(p, hash32)) << RowPrecisionName(p);

    // And back: the narrow checkpoint holds the narrow values exactly.
    const CheckpointManifest saved_n = narrow.Save(dir_b.path());
    Servers again(2);
    again.AddFixed(60, 8, 3, ROW_FP32, RowwiseConfig());
    again.AddHash(8, ROW_FP32, RowwiseConfig());
    s = again.Restore(saved_n, dir_b.path());
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(again.Rows("emb", fixed_ids, 8), fixed_n);
    EXPECT_EQ(again.Rows("ids", hash_ids, 8), hash_n);

    // Into the other narrow precision: widened, then rounded to nearest.
    const RowPrecision other = p == ROW_FP16 ? ROW_BF16 : ROW_FP16;
    Servers across(1);
    across.AddFixed(60, 8, 1, other, RowwiseConfig());
    across.AddHash(8, other, RowwiseConfig());
    s = across.Restore(saved_n, dir_b.path());
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(across.Rows("emb", fixed_ids, 8), Narrowed(other, fixed_n));
    EXPECT_EQ(across.Rows("ids", hash_ids, 8), Narrowed(other, hash_n));
  }
}

// The "values" arrays of the checkpoint files in `dir`, by entry name.
std::map<std::string, CheckpointArrayInfo> ValuesArrays(
    const std::string& dir, const CheckpointManifest& manifest) {
  std::map<std::string, CheckpointArrayInfo> out;
  for (const CheckpointFile& file : manifest.files()) {
    auto entries = ReadCheckpointFile(dir + "/" + file.name());
    EXPECT_TRUE(entries.ok()) << entries.status();
    if (!entries.ok()) continue;
    for (const CheckpointEntry& e : *entries) {
      const int i = e.info.FindArray(kCheckpointValuesKey);
      EXPECT_GE(i, 0) << e.info.name;
      if (i < 0) continue;
      out[e.info.name] = e.info.arrays[i];
      EXPECT_EQ(static_cast<int64_t>(e.data[i].size()),
                e.info.arrays[i].byte_size());
    }
  }
  return out;
}

int64_t FilesBytes(const CheckpointManifest& manifest) {
  int64_t bytes = 0;
  for (const CheckpointFile& file : manifest.files()) {
    bytes += file.size_bytes();
  }
  return bytes;
}

// A narrow table's checkpoint holds its 2-byte values (the dtype in the
// entry's header says which), and a restore in the same precision,
// re-sharded, gives back every bit: the same rows, and the same rows again
// after one more push (so the slots and the step came back too).
TEST(TablePrecisionTest, NarrowCheckpointsHoldTwoBytesPerValue) {
  const std::vector<int64_t> fixed_ids = {0, 17, 33, 59};
  std::vector<int64_t> hash_ids;
  for (int64_t id = -50; id < 450; ++id) hash_ids.push_back(id * 7919);
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    ScratchDir dir_n, dir_32;
    Servers narrow(2), wide(2);
    for (Servers* s : {&narrow, &wide}) {
      const RowPrecision precision = s == &narrow ? p : ROW_FP32;
      s->AddFixed(60, 16, 3, precision, RowwiseConfig());
      s->AddHash(16, precision, RowwiseConfig());
      for (int step = 1; step <= 3; ++step) {
        s->PushBatch("emb", fixed_ids, Grads(4, 16, step), 16);
        s->PushBatch("ids", hash_ids, Grads(500, 16, step), 16);
      }
    }
    const CheckpointManifest saved = narrow.Save(dir_n.path());
    const CheckpointManifest saved32 = wide.Save(dir_32.path());

    const auto arrays = ValuesArrays(dir_n.path(), saved);
    ASSERT_EQ(arrays.size(), 5u);  // 3 fixed shards, 2 hash shards
    int64_t values = 0;
    for (const auto& [entry, a] : arrays) {
      EXPECT_EQ(a.dtype, CheckpointValuesDtype(p)) << entry;
      EXPECT_EQ(CheckpointDtypeSize(a.dtype), 2u) << entry;
      values += a.num_elements();
    }
    EXPECT_EQ(values, (60 + 500) * 16);
    for (const auto& [entry, a] : ValuesArrays(dir_32.path(), saved32)) {
      EXPECT_EQ(a.dtype, CheckpointDtype::kFloat32) << entry;
    }
    // 2 bytes less per value; slots, ids and framing are the same.
    EXPECT_EQ(FilesBytes(saved32) - FilesBytes(saved), values * 2)
        << RowPrecisionName(p);

    // Re-sharded (3 shards on 2 servers into 2 on 3): the same rows.
    Servers back(3);
    back.AddFixed(60, 16, 2, p, RowwiseConfig());
    back.AddHash(16, p, RowwiseConfig());
    absl::Status s = back.Restore(saved, dir_n.path());
    ASSERT_TRUE(s.ok()) << s;
    const std::vector<float> before = narrow.Rows("ids", hash_ids, 16);
    EXPECT_EQ(WidenedBits(back.Rows("emb", fixed_ids, 16)),
              WidenedBits(narrow.Rows("emb", fixed_ids, 16)));
    EXPECT_EQ(WidenedBits(back.Rows("ids", hash_ids, 16)), WidenedBits(before));

    // In the same layout, one more push rounds the same bits: the slots
    // and the shards' steps (the rounding seeds) came back too.
    Servers same(2);
    same.AddFixed(60, 16, 3, p, RowwiseConfig());
    same.AddHash(16, p, RowwiseConfig());
    s = same.Restore(saved, dir_n.path());
    ASSERT_TRUE(s.ok()) << s;
    for (Servers* t : {&narrow, &same}) {
      t->PushBatch("emb", fixed_ids, Grads(4, 16, 9), 16);
      t->PushBatch("ids", hash_ids, Grads(500, 16, 9), 16);
    }
    const std::vector<float> after = narrow.Rows("ids", hash_ids, 16);
    EXPECT_NE(after, before);
    EXPECT_EQ(WidenedBits(same.Rows("ids", hash_ids, 16)), WidenedBits(after))
        << RowPrecisionName(p);
    EXPECT_EQ(WidenedBits(same.Rows("emb", fixed_ids, 16)),
              WidenedBits(narrow.Rows("emb", fixed_ids, 16)));
  }
}

// The offline readers (tessera_predict, the evaluator, the ONNX and Keras
// exporters: RestoreVariables) read a narrow checkpoint widened to fp32,
// the values the servers held.
TEST(TablePrecisionTest, OfflineReadersWidenNarrowCheckpoints) {
  const std::vector<int64_t> fixed_ids = {0, 17, 33, 59};
  const std::vector<int64_t> hash_ids = {5, 77, 123456789, -4};
  for (RowPrecision p : {ROW_FP16, ROW_BF16}) {
    ScratchDir dir;
    Servers narrow(2);
    narrow.AddFixed(60, 8, 3, p, RowwiseConfig());
    narrow.AddHash(8, p, RowwiseConfig());
    narrow.Push("emb", fixed_ids, Grads(4, 8, 1), 8);
    narrow.Push("ids", hash_ids, Grads(4, 8, 1), 8);
    const std::vector<float> all = [&] {
      std::vector<int64_t> every(60);
      for (int64_t i = 0; i < 60; ++i) every[i] = i;
      return narrow.Rows("emb", every, 8);
    }();
    const std::vector<float> hash = narrow.Rows("ids", hash_ids, 8);
    const CheckpointManifest saved = narrow.Save(dir.path());

    VariableToRestore emb, ids;
    emb.variable.name = "emb";
    emb.variable.shape = {60, 8};
    emb.variable.sparse = true;
    emb.optimizer = RowwiseConfig();
    ids.variable.name = "ids";
    ids.variable.shape = {0, 8};
    ids.variable.sparse = true;
    ids.optimizer = RowwiseConfig();
    absl::StatusOr<std::vector<RestoredVariable>> restored =
        RestoreVariables(saved, dir.path(), {emb, ids});
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ((*restored)[0].values, all) << RowPrecisionName(p);
    // Sorted by id: -4, 5, 77, 123456789.
    ASSERT_EQ((*restored)[1].ids, (std::vector<int64_t>{-4, 5, 77, 123456789}));
    const std::vector<int> order = {3, 0, 1, 2};  // of hash_ids
    for (size_t r = 0; r < order.size(); ++r) {
      EXPECT_EQ(std::vector<float>((*restored)[1].values.begin() + r * 8,
                                   (*restored)[1].values.begin() + r * 8 + 8),
                std::vector<float>(hash.begin() + order[r] * 8,
                                   hash.begin() + order[r] * 8 + 8))
          << RowPrecisionName(p) << " id " << (*restored)[1].ids[r];
    }
  }
}

}  // namespace
}  // namespace tessera
