// Sync pushes and pulls over real gRPC and over the TCP data plane on
// loopback: a shard applies the average of a global step's parts once,
// when the step is complete and the next step (or an untagged pull) asks,
// each part counted once however often it is pushed; dense shards and
// table rows alike.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/data_plane/data_plane_kind.h"
#include "ps_server/client/ps_client.h"
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
                    int part, PushResponse* response) {
    SyncPush sync{step, required, part};
    std::vector<absl::Span<const float>> grads = {absl::MakeConstSpan(grad)};
    return client_->PushDense({shard_.name()}, grads, {}, response, &sync);
  }

  // A pull for `sync_step` (nullopt: untagged, as evaluation's).
  std::vector<float> Pull(int64_t* version,
                          std::optional<int64_t> sync_step = std::nullopt) {
    std::vector<float> out(2);
    std::vector<absl::Span<float>> spans = {absl::MakeSpan(out)};
    std::vector<int64_t> versions;
    EXPECT_TRUE(
        client_->PullDense({shard_.name()}, spans, &versions, sync_step).ok());
    *version = versions.at(0);
    return out;
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  const ShardDef shard_ = MakeShardDef("w", 0, {2}, 0, 2, ConstantInit(10));
};

TEST_P(PsServiceSyncTest, AppliesTheAverageOnceWhenTheNextStepPulls) {
  PushResponse r;
  ASSERT_TRUE(Push({2, 4}, 0, 2, 0, &r).ok());
  EXPECT_THAT(r.pending(), ElementsAre(shard_.name()));
  EXPECT_THAT(r.applied(), IsEmpty());
  r.Clear();
  ASSERT_TRUE(Push({4, 8}, 0, 2, 1, &r).ok());
  EXPECT_THAT(r.pending(), ElementsAre(shard_.name()));
  // Complete, but a pull for step 0 (a part run again) reads the values
  // of before it.
  int64_t version = -1;
  EXPECT_THAT(Pull(&version, 0), ElementsAre(10.0f, 10.0f));
  EXPECT_EQ(version, 0);
  // SGD with learning rate 1 on the average (3, 6), applied once.
  EXPECT_THAT(Pull(&version, 1), ElementsAre(7.0f, 4.0f));
  EXPECT_EQ(version, 1);
  EXPECT_THAT(Pull(&version, 2), ElementsAre(7.0f, 4.0f));
  EXPECT_THAT(Pull(&version), ElementsAre(7.0f, 4.0f));
  EXPECT_EQ(version, 1);
}

TEST_P(PsServiceSyncTest, AnUntaggedPullSeesACompleteStep) {
  PushResponse r;
  ASSERT_TRUE(Push({2, 4}, 0, 2, 0, &r).ok());
  int64_t version = -1;
  EXPECT_THAT(Pull(&version), ElementsAre(10.0f, 10.0f));  // incomplete
  ASSERT_TRUE(Push({4, 8}, 0, 2, 1, &r).ok());
  EXPECT_THAT(Pull(&version), ElementsAre(7.0f, 4.0f));
}

// The failure #31 found: a part whose worker died after reaching this
// server is run again; its second push must not count twice.
TEST_P(PsServiceSyncTest, APartRunAgainCountsOnce) {
  PushResponse r;
  ASSERT_TRUE(Push({2, 2}, 4, 2, 0, &r).ok());
  int64_t version = -1;
  EXPECT_THAT(Pull(&version, 4), ElementsAre(10.0f, 10.0f));
  ASSERT_TRUE(Push({2, 2}, 4, 2, 0, &r).ok());             // the re-run
  EXPECT_THAT(Pull(&version), ElementsAre(10.0f, 10.0f));  // still 1 of 2
  ASSERT_TRUE(Push({4, 4}, 4, 2, 1, &r).ok());
  EXPECT_THAT(Pull(&version, 5), ElementsAre(7.0f, 7.0f));
  EXPECT_EQ(version, 1);
}

TEST_P(PsServiceSyncTest, BackupWorkersLateGradientIsDroppedAndReported) {
  PushResponse r;
  ASSERT_TRUE(Push({1, 1}, 3, 2, 0, &r).ok());
  ASSERT_TRUE(Push({3, 3}, 3, 2, 1, &r).ok());
  r.Clear();
  ASSERT_TRUE(Push({100, 100}, 3, 2, 2, &r).ok());  // the third, too late
  EXPECT_THAT(r.late(), ElementsAre(shard_.name()));
  int64_t version = -1;
  EXPECT_THAT(Pull(&version, 4), ElementsAre(8.0f, 8.0f));
  EXPECT_EQ(version, 1);
}

TEST_P(PsServiceSyncTest, MalformedTagOrDisagreementIsRefused) {
  PushResponse r;
  EXPECT_EQ(Push({1, 1}, 0, 0, 0, &r).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Push({1, 1}, 0, 2, -1, &r).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Push({1, 1}, 0, 2, 0, &r).ok());
  absl::Status s = Push({1, 1}, 0, 3, 1, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  int64_t version = -1;
  EXPECT_THAT(Pull(&version), ElementsAre(10.0f, 10.0f));
}

// A push refused for one shard (its pushes disagree on `required`) leaves
// the shards handed over before it with their part.
TEST_P(PsServiceSyncTest, ShardsBeforeARefusalInTheSamePushKeepTheirPart) {
  const ShardDef other = MakeShardDef("v", 0, {2}, 0, 2, ConstantInit(10));
  CreateShardsRequest create;
  *create.add_shards() = other;
  *create.mutable_optimizer() = ps_test::SgdConfig(1.0f);
  CreateShardsResponse created;
  ASSERT_TRUE(client_->CreateShards(create, &created).ok());

  PushResponse r;
  ASSERT_TRUE(Push({2, 2}, 7, 2, 0, &r).ok());  // w: 1 of 2
  const std::vector<float> g = {4, 4};
  std::vector<absl::Span<const float>> one = {absl::MakeConstSpan(g)};
  SyncPush three{7, 3, 0};
  ASSERT_TRUE(client_->PushDense({other.name()}, one, {}, &r, &three).ok());

  // w completes with (2+4)/2 = 3; v disagrees (3 required before, 2 now).
  std::vector<absl::Span<const float>> both = {absl::MakeConstSpan(g),
                                               absl::MakeConstSpan(g)};
  SyncPush two{7, 2, 1};
  absl::Status s =
      client_->PushDense({shard_.name(), other.name()}, both, {}, &r, &two);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  int64_t version = -1;
  EXPECT_THAT(Pull(&version, 8), ElementsAre(7.0f, 7.0f));
  EXPECT_EQ(version, 1);
}

// Table rows in sync mode: each worker's rows of a step are held, the
// per-row average applied when the next step pulls; a worker that
// touched none of the shard's rows still counts as a part.
TEST_P(PsServiceSyncTest, RowsOfAStepAreAveragedAndAppliedOnce) {
  const ShardDef table = MakeShardDef("emb", 0, {4, 2}, 0, 4, ConstantInit(10));
  CreateShardsRequest create;
  *create.add_shards() = table;
  *create.mutable_optimizer() = ps_test::SgdConfig(1.0f);
  CreateShardsResponse created;
  ASSERT_TRUE(client_->CreateShards(create, &created).ok());

  auto push = [&](int part, std::vector<int64_t> ids, std::vector<float> g) {
    const RowsPart parts[1] = {{table.name(), 2, ids}};
    const absl::Span<const float> grads[1] = {g};
    PushResponse r;
    SyncPush sync{0, 3, part};
    absl::Status s = client_->PushRows(parts, grads, &r, &sync);
    EXPECT_THAT(r.pending(), ElementsAre(table.name()));
    return s;
  };
  auto pull = [&](std::optional<int64_t> step) {
    const std::vector<int64_t> ids = {0, 1, 2};
    std::vector<float> out(6);
    const RowsPart parts[1] = {{table.name(), 2, ids}};
    const absl::Span<float> spans[1] = {absl::MakeSpan(out)};
    EXPECT_TRUE(client_->PullRows(parts, spans, step).ok());
    return out;
  };
  ASSERT_TRUE(push(0, {1, 2}, {3, 3, 6, 6}).ok());
  ASSERT_TRUE(push(0, {1, 2}, {3, 3, 6, 6}).ok());  // run again: once
  ASSERT_TRUE(push(1, {}, {}).ok());                // none of its rows here
  EXPECT_THAT(pull(0), ElementsAre(10, 10, 10, 10, 10, 10));
  ASSERT_TRUE(push(2, {2}, {3, 3}).ok());
  // Row 1: 3 / 3 parts; row 2: (6 + 3) / 3.
  EXPECT_THAT(pull(1), ElementsAre(10, 10, 9, 9, 7, 7));
  EXPECT_THAT(pull(std::nullopt), ElementsAre(10, 10, 9, 9, 7, 7));
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
