// PullRows, PushRows, CreateShards, Health and Shutdown of
// ParameterServerService over real gRPC on a loopback port, through
// PsClient, with 4 KiB chunks on both sides; row calls on both planes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ps_server/client/ps_client.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::AdamConfig;
using ps_test::GlorotInit;
using ps_test::InitialValues;
using ps_test::MakeShardDef;
using ps_test::SgdConfig;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int64_t kRowElements = 4;
constexpr int64_t kRowOffset = 300;

class PsServiceRowsTest : public ::testing::TestWithParam<DataPlaneKind> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient(GetParam());
    CreateShardsRequest request;
    *request.add_shards() = table_;
    *request.mutable_optimizer() = SgdConfig(0.5f);
    CreateShardsResponse response;
    absl::Status status = client_->CreateShards(request, &response);
    ASSERT_TRUE(status.ok()) << status;
  }

  std::vector<float> PullAll() {
    std::vector<float> values(ps_test::NumElements(table_));
    std::vector<absl::Span<float>> out = {absl::MakeSpan(values)};
    absl::Status status = client_->PullDense({table_.name()}, out, nullptr);
    EXPECT_TRUE(status.ok()) << status;
    return values;
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  // Rows [300, 700) of a [700, 4] embedding table; 256 rows per 4 KiB chunk.
  const ShardDef table_ = MakeShardDef("emb", 1, {700, kRowElements},
                                       kRowOffset, 400, GlorotInit(700, 4, 5));
  const std::vector<float> initial_ = InitialValues(table_);
};

TEST_P(PsServiceRowsTest, PullRowsReturnsTheRowsOfTheVariableIds) {
  const std::vector<int64_t> ids = {699, 300, 450, 450};
  std::vector<float> out(ids.size() * kRowElements, -1.0f);
  absl::Status status =
      client_->PullRows(table_.name(), ids, kRowElements, absl::MakeSpan(out));
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> expected;
  for (int64_t id : ids) {
    const int64_t local = id - kRowOffset;
    expected.insert(expected.end(), initial_.begin() + local * kRowElements,
                    initial_.begin() + (local + 1) * kRowElements);
  }
  EXPECT_THAT(out, ElementsAreArray(expected));
}

TEST_P(PsServiceRowsTest, PullRowsSpanningSeveralChunks) {
  std::vector<int64_t> ids;
  for (int64_t id = 699; id >= kRowOffset; --id) ids.push_back(id);  // 400
  std::vector<float> out(ids.size() * kRowElements, -1.0f);
  absl::Status status =
      client_->PullRows(table_.name(), ids, kRowElements, absl::MakeSpan(out));
  ASSERT_TRUE(status.ok()) << status;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t local = ids[i] - kRowOffset;
    for (int64_t k = 0; k < kRowElements; ++k) {
      ASSERT_EQ(out[i * kRowElements + k], initial_[local * kRowElements + k])
          << "id " << ids[i];
    }
  }
}

TEST_P(PsServiceRowsTest, PullRowsOutOfRangeIdIsRefused) {
  for (int64_t bad : {int64_t{299}, int64_t{700}, int64_t{-1}}) {
    const std::vector<int64_t> ids = {300, bad};
    std::vector<float> out(ids.size() * kRowElements);
    absl::Status status = client_->PullRows(table_.name(), ids, kRowElements,
                                            absl::MakeSpan(out));
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << bad;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("id ", bad, " ")));
  }
  std::vector<float> out(kRowElements);
  absl::Status status =
      client_->PullRows("nope/part_0", {1}, kRowElements, absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("nope/part_0"));
}

TEST_P(PsServiceRowsTest, PushRowsAppliesOnlyTheNamedRows) {
  const std::vector<int64_t> ids = {302, 305};
  const std::vector<float> grads = {1, 2, 3, 4, -2, -4, -6, -8};
  PushResponse response;
  absl::Status status =
      client_->PushRows(table_.name(), ids, kRowElements, grads, &response);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(response.applied_size(), 1);
  EXPECT_EQ(response.applied(0).version(), 1);

  std::vector<float> expected = initial_;
  for (int64_t k = 0; k < kRowElements; ++k) {
    expected[2 * kRowElements + k] -= 0.5f * grads[k];
    expected[5 * kRowElements + k] -= 0.5f * grads[kRowElements + k];
  }
  EXPECT_THAT(PullAll(), ElementsAreArray(expected));
}

TEST_P(PsServiceRowsTest, PushRowsWithABadChunkChangesNothing) {
  // 300 rows: the second chunk (rows 256..299) carries the bad id.
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 300; ++i) ids.push_back(kRowOffset + i);
  ids[280] = 5;
  std::vector<float> grads(ids.size() * kRowElements, 1.0f);
  PushResponse response;
  absl::Status status =
      client_->PushRows(table_.name(), ids, kRowElements, grads, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("id 5 "));
  EXPECT_THAT(PullAll(), ElementsAreArray(initial_));

  ids[280] = kRowOffset + 280;
  grads[280 * kRowElements + 2] = std::numeric_limits<float>::quiet_NaN();
  status =
      client_->PushRows(table_.name(), ids, kRowElements, grads, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("non-finite"));
  EXPECT_THAT(PullAll(), ElementsAreArray(initial_));
}

TEST_P(PsServiceRowsTest, PushRowsWrongRowSizeIsRefused) {
  const std::vector<int64_t> ids = {310};
  const std::vector<float> grads = {1, 2, 3};
  PushResponse response;
  absl::Status status =
      client_->PushRows(table_.name(), ids, 3, grads, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("wrong shape"));
  EXPECT_THAT(PullAll(), ElementsAreArray(initial_));
}

TEST_P(PsServiceRowsTest, CreateShardsOverRpc) {
  CreateShardsRequest request;
  *request.add_shards() = table_;
  *request.mutable_optimizer() = SgdConfig(0.5f);
  CreateShardsResponse response;
  ASSERT_TRUE(client_->CreateShards(request, &response).ok());
  EXPECT_EQ(response.created(), 0);
  EXPECT_EQ(response.existing(), 1);

  ShardDef changed = table_;
  changed.mutable_initializer()->set_seed(6);
  *request.mutable_shards(0) = changed;
  absl::Status status = client_->CreateShards(request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr(table_.name()));

  *request.mutable_shards(0) =
      MakeShardDef("x", 0, {2}, 0, 2, GlorotInit(2, 1, 1));
  request.mutable_optimizer()->set_learning_rate(0);
  status = client_->CreateShards(request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("learning_rate"));
  EXPECT_EQ(server_.store().num_shards(), 1);
}

TEST_P(PsServiceRowsTest, HealthReportsShardsAndResidentBytes) {
  HealthResponse health;
  absl::Status status = client_->Health(&health);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(health.task_type(), "ps");
  EXPECT_EQ(health.num_shards(), 1);
  EXPECT_EQ(health.resident_bytes(), 400 * kRowElements * 4);

  CreateShardsRequest request;
  *request.add_shards() =
      MakeShardDef("w", 0, {10, 10}, 0, 10, GlorotInit(10, 10, 1));
  *request.add_shards() =
      MakeShardDef("w", 1, {10, 10}, 10, 0, GlorotInit(10, 10, 1));
  *request.mutable_optimizer() = AdamConfig(0.01f, 0.9f, 0.999f, 1e-7f);
  CreateShardsResponse response;
  ASSERT_TRUE(client_->CreateShards(request, &response).ok());
  status = client_->Health(&health);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(health.num_shards(), 3);
  // The Adam shard carries two slots besides its values.
  EXPECT_EQ(health.resident_bytes(), 400 * kRowElements * 4 + 3 * 100 * 4);
  // A fixed shard's rows are all present: all of it is used.
  EXPECT_EQ(health.used_bytes(), health.resident_bytes());
}

TEST_P(PsServiceRowsTest, ShutdownNotifiesTheOwner) {
  EXPECT_FALSE(server_.service().shutdown_requested().HasBeenNotified());
  absl::Status status = client_->Shutdown("test is done");
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(server_.service().shutdown_requested().HasBeenNotified());
  // A second request is answered too, and does not notify twice (which
  // would crash absl::Notification).
  EXPECT_TRUE(client_->Shutdown("again").ok());
}

// Every case runs on both planes: the gRPC calls, and the TCP data plane
// the same server announces.
INSTANTIATE_TEST_SUITE_P(
    Planes, PsServiceRowsTest,
    ::testing::Values(DataPlaneKind::kGrpc, DataPlaneKind::kTcp),
    [](const ::testing::TestParamInfo<DataPlaneKind>& info) {
      return std::string(DataPlaneName(info.param));
    });

}  // namespace
}  // namespace tessera
