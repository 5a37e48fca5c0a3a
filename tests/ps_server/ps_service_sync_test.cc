// Sync pushes over real gRPC and over the TCP data plane on loopback: a
// shard applies the average of a global step's gradients once, when the
// step's required pushes arrived.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/data_plane/data_plane_kind.h"
#include "ps_server/ps_client.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::ConstantInit;
using ps_test::MakeShardDef;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class PsServiceSyncTest : public ::testing::TestWithParam<DataPlaneKind> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient(GetParam());
    CreateShardsRequest request;
    *request.add_shards() = shard_;
    *request.mutable_optimizer() = ps_test::SgdConfig(1.0f);
    CreateShardsResponse response;
    ASSERT_TRUE(client_->CreateShards(request, &response).ok());
  }

  absl::Status Push(std::vector<float> grad, int64_t step, int required,
                    PushResponse* response) {
    SyncPush sync{step, required};
    std::vector<absl::Span<const float>> grads = {absl::MakeConstSpan(grad)};
    return client_->PushDense({shard_.name()}, grads, {}, response, &sync);
  }

  std::vector<float> Pull(int64_t* version) {
    std::vector<float> out(2);
    std::vector<absl::Span<float>> spans = {absl::MakeSpan(out)};
    std::vector<int64_t> versions;
    EXPECT_TRUE(client_->PullDense({shard_.name()}, spans, &versions).ok());
    *version = versions.at(0);
    return out;
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  const ShardDef shard_ = MakeShardDef("w", 0, {2}, 0, 2, ConstantInit(10));
};

TEST_P(PsServiceSyncTest, AppliesTheAverageOnceTheStepIsComplete) {
  PushResponse r;
  ASSERT_TRUE(Push({2, 4}, 0, 2, &r).ok());
  EXPECT_THAT(r.pending(), ElementsAre(shard_.name()));
  EXPECT_THAT(r.applied(), IsEmpty());
  int64_t version = -1;
  EXPECT_THAT(Pull(&version), ElementsAre(10.0f, 10.0f));  // not yet
  EXPECT_EQ(version, 0);

  r.Clear();
  ASSERT_TRUE(Push({4, 8}, 0, 2, &r).ok());
  ASSERT_EQ(r.applied_size(), 1);
  EXPECT_EQ(r.applied(0).version(), 1);
  // SGD with learning rate 1 on the average (3, 6), applied once.
  EXPECT_THAT(Pull(&version), ElementsAre(7.0f, 4.0f));
  EXPECT_EQ(version, 1);
}

TEST_P(PsServiceSyncTest, BackupWorkersLateGradientIsDroppedAndReported) {
  PushResponse r;
  ASSERT_TRUE(Push({1, 1}, 3, 2, &r).ok());
  ASSERT_TRUE(Push({3, 3}, 3, 2, &r).ok());
  r.Clear();
  ASSERT_TRUE(Push({100, 100}, 3, 2, &r).ok());  // the third, too late
  EXPECT_THAT(r.late(), ElementsAre(shard_.name()));
  int64_t version = -1;
  EXPECT_THAT(Pull(&version), ElementsAre(8.0f, 8.0f));
  EXPECT_EQ(version, 1);
}

TEST_P(PsServiceSyncTest, MalformedTagOrDisagreementIsRefused) {
  PushResponse r;
  EXPECT_EQ(Push({1, 1}, 0, 0, &r).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Push({1, 1}, 0, 2, &r).ok());
  absl::Status s = Push({1, 1}, 0, 3, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  int64_t version = -1;
  EXPECT_THAT(Pull(&version), ElementsAre(10.0f, 10.0f));
}

// A push that completes one shard's step and is then refused for another
// shard (its pushes disagree on `required`) still applies the completed
// step: the aggregator has released it, and nothing else would apply it.
TEST_P(PsServiceSyncTest, StepCompletedBeforeARefusalInTheSamePushIsApplied) {
  const ShardDef other = MakeShardDef("v", 0, {2}, 0, 2, ConstantInit(10));
  CreateShardsRequest create;
  *create.add_shards() = other;
  *create.mutable_optimizer() = ps_test::SgdConfig(1.0f);
  CreateShardsResponse created;
  ASSERT_TRUE(client_->CreateShards(create, &created).ok());

  PushResponse r;
  ASSERT_TRUE(Push({2, 2}, 7, 2, &r).ok());  // w: 1 of 2
  const std::vector<float> g = {4, 4};
  std::vector<absl::Span<const float>> one = {absl::MakeConstSpan(g)};
  SyncPush three{7, 3};
  ASSERT_TRUE(client_->PushDense({other.name()}, one, {}, &r, &three).ok());

  // w completes with (2+4)/2 = 3; v disagrees (3 required before, 2 now).
  std::vector<absl::Span<const float>> both = {absl::MakeConstSpan(g),
                                               absl::MakeConstSpan(g)};
  SyncPush two{7, 2};
  absl::Status s =
      client_->PushDense({shard_.name(), other.name()}, both, {}, &r, &two);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  int64_t version = -1;
  EXPECT_THAT(Pull(&version), ElementsAre(7.0f, 7.0f));
  EXPECT_EQ(version, 1);
}

// Every case runs on both planes: the gRPC calls, and the TCP data plane
// the same server announces (the raw-stream cases drive gRPC directly and
// hold on both).
INSTANTIATE_TEST_SUITE_P(
    Planes, PsServiceSyncTest,
    ::testing::Values(DataPlaneKind::kGrpc, DataPlaneKind::kTcp),
    [](const ::testing::TestParamInfo<DataPlaneKind>& info) {
      return std::string(DataPlaneName(info.param));
    });

}  // namespace
}  // namespace tessera
