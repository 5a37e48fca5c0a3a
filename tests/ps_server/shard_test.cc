#include "ps_server/shard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "common/initializer.h"
#include "common/optimizer/optimizer.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::AdamConfig;
using ps_test::ConstantInit;
using ps_test::GlorotInit;
using ps_test::MakeShardDef;
using ps_test::MomentumConfig;
using ps_test::SgdConfig;
using ps_test::ZerosInit;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(config);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return optimizer.ok() ? *std::move(optimizer) : nullptr;
}

std::unique_ptr<Shard> MakeShard(const ShardDef& def,
                                 const Optimizer* optimizer) {
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(def, optimizer);
  EXPECT_TRUE(shard.ok()) << shard.status();
  return shard.ok() ? *std::move(shard) : nullptr;
}

std::vector<float> ReadAll(const Shard& shard) {
  std::vector<float> values(shard.num_elements());
  shard.ReadBytes(0, shard.byte_size(), reinterpret_cast<char*>(values.data()));
  return values;
}

// Splits a [10, 3] variable into rows [0, 4) and [4, 10) and checks that
// each shard holds exactly its slice of the whole variable's values.
void ExpectShardsAreSlicesOfVariable(const Initializer& init) {
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(0.1f));
  std::vector<float> whole(30);
  FillInitialValues(init, 0, absl::MakeSpan(whole));

  std::unique_ptr<Shard> part0 =
      MakeShard(MakeShardDef("v", 0, {10, 3}, 0, 4, init), sgd.get());
  std::unique_ptr<Shard> part1 =
      MakeShard(MakeShardDef("v", 1, {10, 3}, 4, 6, init), sgd.get());
  ASSERT_NE(part0, nullptr);
  ASSERT_NE(part1, nullptr);
  EXPECT_EQ(part0->rows(), 4);
  EXPECT_EQ(part1->rows(), 6);
  EXPECT_EQ(part1->row_elements(), 3);
  EXPECT_THAT(ReadAll(*part0),
              ElementsAreArray(whole.begin(), whole.begin() + 12));
  EXPECT_THAT(ReadAll(*part1),
              ElementsAreArray(whole.begin() + 12, whole.end()));
}

TEST(ShardTest, GlorotShardsAreSlicesOfTheWholeVariable) {
  const Initializer init = GlorotInit(10, 3, 1234);
  ExpectShardsAreSlicesOfVariable(init);

  // The values are really random and inside Glorot's limit, so the slice
  // comparison above could not pass by accident with constant values.
  std::vector<float> whole(30);
  FillInitialValues(init, 0, absl::MakeSpan(whole));
  const float limit = std::sqrt(6.0f / 13.0f);
  int distinct = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_LE(std::abs(whole[i]), limit);
    if (i > 0 && whole[i] != whole[i - 1]) ++distinct;
  }
  EXPECT_GT(distinct, 20);
}

TEST(ShardTest, ZerosShardsAreSlicesOfTheWholeVariable) {
  ExpectShardsAreSlicesOfVariable(ZerosInit());
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(0.1f));
  std::unique_ptr<Shard> shard =
      MakeShard(MakeShardDef("z", 1, {10, 3}, 4, 6, ZerosInit()), sgd.get());
  ASSERT_NE(shard, nullptr);
  EXPECT_THAT(ReadAll(*shard), ::testing::Each(0.0f));
}

TEST(ShardTest, RankZeroShardHasOneElement) {
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(0.5f));
  std::unique_ptr<Shard> shard = MakeShard(
      MakeShardDef("bias", 0, {}, 0, 0, ConstantInit(3.0f)), sgd.get());
  ASSERT_NE(shard, nullptr);
  EXPECT_EQ(shard->num_elements(), 1);
  EXPECT_EQ(shard->byte_size(), 4);
  EXPECT_THAT(ReadAll(*shard), ElementsAre(3.0f));
  const float grad = 2.0f;
  shard->ApplyDense(absl::MakeConstSpan(&grad, 1));
  EXPECT_THAT(ReadAll(*shard), ElementsAre(2.0f));
}

TEST(ShardTest, ReadBytesReadsTheRequestedRange) {
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(0.1f));
  const ShardDef def =
      MakeShardDef("v", 1, {10, 3}, 4, 6, GlorotInit(10, 3, 7));
  std::unique_ptr<Shard> shard = MakeShard(def, sgd.get());
  ASSERT_NE(shard, nullptr);
  const std::vector<float> expected = ps_test::InitialValues(def);

  // Elements [5, 9) of the shard, as bytes.
  std::vector<float> part(4, -1.0f);
  shard->ReadBytes(5 * sizeof(float), 4 * sizeof(float),
                   reinterpret_cast<char*>(part.data()));
  EXPECT_THAT(part,
              ElementsAreArray(expected.begin() + 5, expected.begin() + 9));

  // A range that does not start on a float boundary.
  char bytes[6];
  shard->ReadBytes(3, 6, bytes);
  EXPECT_EQ(
      std::memcmp(bytes, reinterpret_cast<const char*>(expected.data()) + 3, 6),
      0);
}

TEST(ShardTest, ReadRowsCopiesRowsInRequestOrder) {
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(0.1f));
  const ShardDef def =
      MakeShardDef("v", 1, {10, 3}, 4, 6, GlorotInit(10, 3, 9));
  std::unique_ptr<Shard> shard = MakeShard(def, sgd.get());
  ASSERT_NE(shard, nullptr);
  const std::vector<float> all = ps_test::InitialValues(def);

  const std::vector<int64_t> rows = {5, 0, 5};
  std::vector<float> out(rows.size() * 3);
  shard->ReadRows(rows, out.data());
  EXPECT_THAT(out, ElementsAre(all[15], all[16], all[17], all[0], all[1],
                               all[2], all[15], all[16], all[17]));
}

TEST(ShardTest, VersionCountsAppliedUpdates) {
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(1.0f));
  std::unique_ptr<Shard> shard =
      MakeShard(MakeShardDef("v", 0, {2, 2}, 0, 2, ZerosInit()), sgd.get());
  ASSERT_NE(shard, nullptr);
  EXPECT_EQ(shard->version(), 0);
  std::vector<float> out(4);
  EXPECT_EQ(shard->ReadBytes(0, 16, reinterpret_cast<char*>(out.data())), 0);

  const std::vector<float> grad = {1, 2, 3, 4};
  EXPECT_EQ(shard->ApplyDense(grad), 1);
  EXPECT_EQ(shard->ApplyDense(grad), 2);
  const std::vector<int64_t> rows = {1};
  const std::vector<float> row_grad = {10, 20};
  EXPECT_EQ(shard->ApplyRows(rows, row_grad), 3);
  EXPECT_EQ(shard->version(), 3);
  EXPECT_EQ(shard->ReadBytes(0, 16, reinterpret_cast<char*>(out.data())), 3);
  EXPECT_EQ(shard->ReadRows(rows, out.data()), 3);
  EXPECT_THAT(ReadAll(*shard), ElementsAre(-2, -4, -16, -28));
}

TEST(ShardTest, ApplyRowsChangesOnlyTheNamedRows) {
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(0.5f));
  std::unique_ptr<Shard> shard = MakeShard(
      MakeShardDef("e", 0, {4, 2}, 0, 4, ConstantInit(1.0f)), sgd.get());
  ASSERT_NE(shard, nullptr);
  const std::vector<int64_t> rows = {2, 0};
  const std::vector<float> grads = {2, 4, 6, 8};  // row 2, then row 0
  shard->ApplyRows(rows, grads);
  EXPECT_THAT(ReadAll(*shard), ElementsAre(-2, -3, 1, 1, 0, -1, 1, 1));
}

TEST(ShardTest, ResidentBytesCountsOptimizerSlots) {
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(0.1f));
  std::unique_ptr<Optimizer> momentum =
      MakeOptimizer(MomentumConfig(0.1f, 0.9f, false));
  std::unique_ptr<Optimizer> adam =
      MakeOptimizer(AdamConfig(0.1f, 0.9f, 0.999f, 1e-7f));
  const ShardDef def = MakeShardDef("v", 0, {100, 5}, 0, 100, ZerosInit());
  const int64_t bytes = 100 * 5 * sizeof(float);
  std::unique_ptr<Shard> s1 = MakeShard(def, sgd.get());
  std::unique_ptr<Shard> s2 = MakeShard(def, momentum.get());
  std::unique_ptr<Shard> s3 = MakeShard(def, adam.get());
  ASSERT_TRUE(s1 && s2 && s3);
  EXPECT_EQ(s1->byte_size(), bytes);
  EXPECT_EQ(s1->resident_bytes(), bytes);
  EXPECT_EQ(s2->resident_bytes(), 2 * bytes);
  EXPECT_EQ(s3->resident_bytes(), 3 * bytes);
}

TEST(ShardTest, CreateRejectsBadDefinitions) {
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(0.1f));

  ShardDef int_shard = MakeShardDef("ints", 0, {4}, 0, 4, ZerosInit());
  int_shard.set_dtype(DT_INT32);
  absl::StatusOr<std::unique_ptr<Shard>> s =
      Shard::Create(int_shard, sgd.get());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("ints/part_0"));

  ShardDef negative = MakeShardDef("neg", 0, {4, 3}, 0, 4, ZerosInit());
  negative.mutable_shape()->set_dims(1, -3);
  s = Shard::Create(negative, sgd.get());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("negative dimension"));

  // row_offset + rows overflows int64: not a row range of a 10-row variable.
  ShardDef overflow = MakeShardDef("far", 0, {10}, 0, 1, ZerosInit());
  overflow.set_row_offset(std::numeric_limits<int64_t>::max());
  s = Shard::Create(overflow, sgd.get());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("not a row range"));

  s = Shard::Create(
      MakeShardDef("glorot", 0, {4, 3}, 0, 4, GlorotInit(0, 3, 1)), sgd.get());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("glorot/part_0"));
  EXPECT_THAT(s.status().message(), HasSubstr("fan_in"));
}

TEST(ShardTest, CreateRefusesAShardTooLargeToHold) {
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(0.1f));
  const int64_t rows = int64_t{1} << 40;
  const ShardDef huge =
      MakeShardDef("huge", 0, {rows, int64_t{1} << 20}, 0, rows, ZerosInit());
  absl::StatusOr<std::unique_ptr<Shard>> s = absl::InternalError("not run");
  EXPECT_NO_THROW(s = Shard::Create(huge, sgd.get()));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("huge/part_0"));
}

}  // namespace
}  // namespace tessera
