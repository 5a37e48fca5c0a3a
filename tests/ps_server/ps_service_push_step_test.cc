// An asynchronous push carries its worker step's number (SyncPush with
// required 0), and the server applies that step's rate of the learning-rate
// schedule, whatever order the pushes arrive in: dense shards, a fixed
// table's rows and a growing table's rows, over gRPC and the TCP data
// plane. A push without a number keeps the rate of the shard's count.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/data_plane/data_plane_kind.h"
#include "common/optimizer/learning_rate_schedule.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/wire/sync_push.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::ConstantInit;
using ps_test::MakeShardDef;

constexpr float kRate = 0.5f;
constexpr int64_t kDim = 2;

// SGD whose rate decays 1% a step, so every step's rate differs.
OptimizerConfig DecayingSgd() {
  OptimizerConfig config = ps_test::SgdConfig(kRate);
  LearningRateSchedule* schedule = config.mutable_schedule();
  schedule->set_decay(LearningRateSchedule::DECAY_EXPONENTIAL);
  schedule->set_decay_steps(1);
  schedule->set_decay_rate(0.99);
  return config;
}

float RateOf(int64_t t) {
  absl::StatusOr<LearningRate> rate = LearningRate::Create(DecayingSgd());
  EXPECT_TRUE(rate.ok()) << rate.status();
  return rate->Rate(t);
}

ShardDef HashDef() {
  ShardDef def;
  def.set_name("cat/part_0");
  def.set_variable("cat");
  def.set_index(0);
  def.set_dtype(DT_FLOAT);
  def.set_hash_table(true);
  def.set_dim(kDim);
  def.set_num_shards(1);
  def.set_expected_rows(100);
  *def.mutable_initializer() = ConstantInit(0.0f);
  return def;
}

class PsServicePushStepTest : public ::testing::TestWithParam<DataPlaneKind> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient(GetParam());
    CreateShardsRequest request;
    *request.add_shards() = dense_;
    *request.add_shards() = table_;
    *request.add_shards() = HashDef();
    *request.mutable_optimizer() = DecayingSgd();
    CreateShardsResponse response;
    absl::Status status = client_->CreateShards(request, &response);
    ASSERT_TRUE(status.ok()) << status;
  }

  // One push of gradient g to every element of the dense shard and to
  // row 3 of each table, tagged with `step` (0: untagged).
  void PushAll(float g, int64_t step) {
    const SyncPush tag{step, 0, 0};
    const SyncPush* sync = step > 0 ? &tag : nullptr;
    const std::vector<float> dense(2, g), row(kDim, g);
    const std::vector<absl::Span<const float>> grads = {dense};
    PushResponse response;
    absl::Status status =
        client_->PushDense({dense_.name()}, grads, {}, &response, sync);
    ASSERT_TRUE(status.ok()) << status;
    const std::vector<int64_t> ids = {3};
    for (const std::string& name : {table_.name(), HashDef().name()}) {
      status = client_->PushRows(name, ids, kDim, row, &response, sync);
      ASSERT_TRUE(status.ok()) << name << ": " << status;
    }
  }

  // The first element of the dense shard and of row 3 of both tables.
  std::vector<float> Values() {
    std::vector<float> dense(2);
    std::vector<absl::Span<float>> out = {absl::MakeSpan(dense)};
    absl::Status status = client_->PullDense({dense_.name()}, out, nullptr);
    EXPECT_TRUE(status.ok()) << status;
    std::vector<float> values = {dense[0]};
    for (const std::string& name : {table_.name(), HashDef().name()}) {
      std::vector<float> row(kDim);
      status = client_->PullRows(name, {3}, kDim, absl::MakeSpan(row));
      EXPECT_TRUE(status.ok()) << name << ": " << status;
      values.push_back(row[0]);
    }
    return values;
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  const ShardDef dense_ = MakeShardDef("w", 0, {2}, 0, 2, ConstantInit(0.0f));
  const ShardDef table_ =
      MakeShardDef("emb", 0, {10, kDim}, 0, 10, ConstantInit(0.0f));
};

TEST_P(PsServicePushStepTest, LaterStepArrivingFirstGetsItsOwnRate) {
  ASSERT_NE(RateOf(5), RateOf(500));
  PushAll(1.0f, 500);
  PushAll(10.0f, 5);
  const float expected = -(RateOf(500) * 1.0f + RateOf(5) * 10.0f);
  for (float v : Values()) EXPECT_FLOAT_EQ(v, expected);
}

TEST_P(PsServicePushStepTest, EarlierStepArrivingFirstGetsTheSameRates) {
  PushAll(10.0f, 5);
  PushAll(1.0f, 500);
  const float expected = -(RateOf(500) * 1.0f + RateOf(5) * 10.0f);
  for (float v : Values()) EXPECT_FLOAT_EQ(v, expected);
}

TEST_P(PsServicePushStepTest, UntaggedPushesGetTheRateOfTheShardsCount) {
  PushAll(1.0f, 0);
  PushAll(10.0f, 0);
  const float expected = -(RateOf(1) * 1.0f + RateOf(2) * 10.0f);
  for (float v : Values()) EXPECT_FLOAT_EQ(v, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Planes, PsServicePushStepTest,
    ::testing::Values(DataPlaneKind::kGrpc, DataPlaneKind::kTcp),
    [](const ::testing::TestParamInfo<DataPlaneKind>& info) {
      return std::string(DataPlaneName(info.param));
    });

}  // namespace
}  // namespace tessera
