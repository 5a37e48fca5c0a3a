// PullRows and PushRows of growing (hash) tables over real gRPC on loopback
// through PsClient, with 4 KiB chunks: row creation, determinism across two
// servers, Adagrad by hand, duplicate ids, and bad inputs that must change
// nothing.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "partitioners/hash_routing.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/hash_table.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int64_t kDim = 8;
constexpr int kShards = 2;
constexpr int kIndex = 1;  // this server holds shard 1 of 2

ShardDef TableDef() {
  ShardDef def;
  def.set_name("cat/part_1");
  def.set_variable("cat");
  def.set_index(kIndex);
  def.set_dtype(DT_FLOAT);
  def.set_hash_table(true);
  def.set_dim(kDim);
  def.set_num_shards(kShards);
  def.set_expected_rows(1000);
  Initializer* init = def.mutable_initializer();
  init->set_kind(Initializer::UNIFORM);
  init->set_minval(-0.05f);
  init->set_maxval(0.05f);
  init->set_seed(99);
  return def;
}

OptimizerConfig Adagrad(float lr) {
  OptimizerConfig config;
  config.set_learning_rate(lr);
  config.mutable_adagrad();
  return config;
}

// `n` ids that HashShardOf routes to shard kIndex, spread over int64.
std::vector<int64_t> OwnIds(int n, int64_t salt = 0) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; static_cast<int>(ids.size()) < n; ++i) {
    const int64_t id = (i + salt) * 0x9E3779B97F4A7C15ll;
    if (HashShardOf(id, kShards) == kIndex) ids.push_back(id);
  }
  return ids;
}

int64_t ForeignId() {
  for (int64_t id = 0;; ++id) {
    if (HashShardOf(id, kShards) != kIndex) return id;
  }
}

std::vector<float> InitialRows(const std::vector<int64_t>& ids) {
  std::vector<float> rows(ids.size() * kDim);
  for (size_t i = 0; i < ids.size(); ++i) {
    HashRowInitialValues(TableDef().initializer(), ids[i],
                         absl::MakeSpan(rows.data() + i * kDim, kDim));
  }
  return rows;
}

class PsServiceHashRowsTest : public ::testing::TestWithParam<DataPlaneKind> {
 protected:
  void SetUp() override {
    for (auto* server : {&server_, &other_}) {
      ASSERT_TRUE(server->started());
      CreateShardsRequest request;
      *request.add_shards() = TableDef();
      *request.mutable_optimizer() = Adagrad(0.1f);
      CreateShardsResponse response;
      absl::Status status =
          server->NewClient()->CreateShards(request, &response);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_EQ(response.created(), 1);
    }
    client_ = server_.NewClient(GetParam());
  }

  std::vector<float> Pull(const std::vector<int64_t>& ids) {
    std::vector<float> out(ids.size() * kDim, -1.0f);
    absl::Status status =
        client_->PullRows("cat/part_1", ids, kDim, absl::MakeSpan(out));
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }

  int64_t TableRows() {
    absl::StatusOr<std::shared_ptr<RowTable>> table =
        server_.store().FindRows("cat/part_1");
    EXPECT_TRUE(table.ok());
    return static_cast<HashTable&>(**table).rows();
  }

  ps_test::TestPsServer server_;
  ps_test::TestPsServer other_;
  std::unique_ptr<PsClient> client_;
};

TEST_P(PsServiceHashRowsTest, PullCreatesTheSameRowsOnEveryServer) {
  const std::vector<int64_t> ids = OwnIds(600);  // 600 rows: 5 chunks
  EXPECT_EQ(TableRows(), 0);
  const std::vector<float> here = Pull(ids);
  EXPECT_EQ(TableRows(), 600);
  EXPECT_THAT(here, ElementsAreArray(InitialRows(ids)));
  // Another server (a restarted one, say) makes the same rows, in any order.
  std::vector<int64_t> reversed(ids.rbegin(), ids.rend());
  std::vector<float> there(reversed.size() * kDim);
  absl::Status status = other_.NewClient()->PullRows(
      "cat/part_1", reversed, kDim, absl::MakeSpan(there));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(there, ElementsAreArray(InitialRows(reversed)));
}

TEST_P(PsServiceHashRowsTest, PushAppliesAdagradToThePushedRowsOnly) {
  const std::vector<int64_t> ids = OwnIds(3);
  const std::vector<float> before = Pull(ids);
  // Push rows 0 and 2 only, g = 0.5 everywhere in row 0, -1 in row 2:
  // acc = 0.1 + g^2; w -= 0.1 * g / (sqrt(acc) + 1e-7), so
  // row 0 moves by -0.05 / sqrt(0.35) = -0.0845154 and
  // row 2 by +0.1 / sqrt(1.1) = +0.0953463.
  std::vector<float> grads(2 * kDim);
  for (int k = 0; k < kDim; ++k) {
    grads[k] = 0.5f;
    grads[kDim + k] = -1.0f;
  }
  PushResponse response;
  absl::Status status =
      client_->PushRows("cat/part_1", {ids[0], ids[2]}, kDim, grads, &response);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(response.applied_size(), 1);
  EXPECT_EQ(response.applied(0).version(), 1);
  const std::vector<float> after = Pull(ids);
  for (int k = 0; k < kDim; ++k) {
    EXPECT_NEAR(after[k], before[k] - 0.0845154, 1e-6);
    EXPECT_EQ(after[kDim + k], before[kDim + k]);
    EXPECT_NEAR(after[2 * kDim + k], before[2 * kDim + k] + 0.0953463, 1e-6);
  }
}

// A push may create rows; a repeated id is summed before the update (Keras'
// behaviour), which Adagrad tells apart from two updates.
TEST_P(PsServiceHashRowsTest, RepeatedIdsInOnePushAreSummed) {
  const std::vector<int64_t> ids = OwnIds(2, 1000);
  std::vector<float> grads(3 * kDim);
  for (int k = 0; k < kDim; ++k) {
    grads[k] = 0.25f;             // ids[0]
    grads[kDim + k] = 1.0f;       // ids[1]
    grads[2 * kDim + k] = 0.25f;  // ids[0] again: sum 0.5
  }
  PushResponse response;
  absl::Status status = client_->PushRows(
      "cat/part_1", {ids[0], ids[1], ids[0]}, kDim, grads, &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(TableRows(), 2);
  const std::vector<float> initial = InitialRows(ids);
  const std::vector<float> after = Pull(ids);
  for (int k = 0; k < kDim; ++k) {
    // g = 0.5 once: -0.05 / sqrt(0.35); g = 1: -0.1 / sqrt(1.1).
    EXPECT_NEAR(after[k], initial[k] - 0.0845154, 1e-6);
    EXPECT_NEAR(after[kDim + k], initial[kDim + k] - 0.0953463, 1e-6);
  }
}

TEST_P(PsServiceHashRowsTest, BadPushesChangeAndCreateNothing) {
  const std::vector<int64_t> held = OwnIds(4);
  const std::vector<float> before = Pull(held);
  ASSERT_EQ(TableRows(), 4);
  // 300 new ids over three chunks, with the bad part in the last chunk.
  std::vector<int64_t> ids = OwnIds(300, 5000);
  ids.insert(ids.begin(), held.begin(), held.end());
  std::vector<float> grads(ids.size() * kDim, 1.0f);
  PushResponse response;

  std::vector<int64_t> foreign = ids;
  foreign.back() = ForeignId();
  absl::Status status =
      client_->PushRows("cat/part_1", foreign, kDim, grads, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("id ", ForeignId())));
  EXPECT_THAT(status.message(), HasSubstr("HashShardOf"));

  std::vector<float> nan = grads;
  nan[(ids.size() - 2) * kDim + 3] = std::numeric_limits<float>::quiet_NaN();
  status = client_->PushRows("cat/part_1", ids, kDim, nan, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("non-finite"));

  std::vector<float> inf = grads;
  inf[5] = std::numeric_limits<float>::infinity();
  status = client_->PushRows("cat/part_1", ids, kDim, inf, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);

  status = client_->PushRows("cat/part_1", {held[0]}, kDim - 1,
                             std::vector<float>(kDim - 1, 1.0f), &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("wrong shape"));

  status = client_->PushRows("nope/part_0", {held[0]}, kDim,
                             std::vector<float>(kDim, 1.0f), &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("nope/part_0"));

  EXPECT_EQ(TableRows(), 4);
  EXPECT_THAT(Pull(held), ElementsAreArray(before));
  absl::StatusOr<std::shared_ptr<RowTable>> table =
      server_.store().FindRows("cat/part_1");
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(static_cast<HashTable&>(**table).version(), 0);
}

TEST_P(PsServiceHashRowsTest, BadPullsAreRefused) {
  std::vector<float> out(kDim);
  absl::Status status =
      client_->PullRows("cat/part_1", {ForeignId()}, kDim, absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("id ", ForeignId())));
  EXPECT_EQ(TableRows(), 0);
  // A hash table has no dense value.
  std::vector<float> dense(16);
  std::vector<absl::Span<float>> outs = {absl::MakeSpan(dense)};
  status = client_->PullDense({"cat/part_1"}, outs, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("hash table"));
}

TEST_P(PsServiceHashRowsTest, CreateValidatesHashDefinitions) {
  CreateShardsRequest request;
  *request.add_shards() = TableDef();
  *request.mutable_optimizer() = Adagrad(0.1f);
  CreateShardsResponse response;
  ASSERT_TRUE(client_->CreateShards(request, &response).ok());
  EXPECT_EQ(response.existing(), 1);
  ShardDef bad = TableDef();
  bad.set_name("cat2/part_0");
  bad.set_dim(0);
  *request.add_shards() = bad;
  absl::Status status = client_->CreateShards(request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("cat2/part_0"));
  EXPECT_EQ(server_.store().num_shards(), 1);
  HealthResponse health;
  ASSERT_TRUE(client_->Health(&health).ok());
  EXPECT_GT(health.resident_bytes(), 0);
  // Issue #42: no row was pulled, so none is used of what is allocated.
  EXPECT_EQ(health.used_bytes(), 0);
}

// Fixed tables sum repeated ids too.
TEST(PsServiceFixedRowsTest, RepeatedIdsInOnePushAreSummed) {
  ps_test::TestPsServer server;
  ASSERT_TRUE(server.started());
  std::unique_ptr<PsClient> client = server.NewClient();
  CreateShardsRequest request;
  *request.add_shards() = ps_test::MakeShardDef("emb", 0, {10, 2}, 0, 10,
                                                ps_test::ConstantInit(1.0f));
  *request.mutable_optimizer() = Adagrad(0.1f);
  CreateShardsResponse response;
  ASSERT_TRUE(client->CreateShards(request, &response).ok());
  PushResponse pushed;
  absl::Status status = client->PushRows("emb/part_0", {3, 3}, 2,
                                         {0.25f, 0.25f, 0.25f, 0.25f}, &pushed);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> out(2);
  ASSERT_TRUE(client->PullRows("emb/part_0", {3}, 2, absl::MakeSpan(out)).ok());
  // One update with g = 0.5: 1 - 0.05 / sqrt(0.35) = 0.9154846.
  EXPECT_NEAR(out[0], 0.9154846, 1e-6);
  EXPECT_NEAR(out[1], 0.9154846, 1e-6);
}

// Every case runs on both planes: the gRPC calls, and the TCP data plane
// the same server announces.
INSTANTIATE_TEST_SUITE_P(
    Planes, PsServiceHashRowsTest,
    ::testing::Values(DataPlaneKind::kGrpc, DataPlaneKind::kTcp),
    [](const ::testing::TestParamInfo<DataPlaneKind>& info) {
      return std::string(DataPlaneName(info.param));
    });

}  // namespace
}  // namespace tessera
