// PsClient's split dense calls (Begin*, then the Pending's Finish), which a
// worker uses to have a call in flight at every parameter server at once
// from one thread, on both transports: the same results and errors as the
// blocking calls, whichever transport PsClient picked.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/data_plane/data_plane_kind.h"
#include "common/rpc/grpc_channel.h"
#include "ps_server/client/ps_client.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::ConstantInit;
using ps_test::MakeShardDef;
using ps_test::SgdConfig;
using ::testing::Each;
using ::testing::HasSubstr;

class PsClientSplitTest : public ::testing::TestWithParam<DataPlaneKind> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient(GetParam());
    CreateShardsRequest request;
    *request.add_shards() = a_;
    *request.add_shards() = b_;
    *request.mutable_optimizer() = SgdConfig(1.0f);
    CreateShardsResponse response;
    ASSERT_TRUE(client_->CreateShards(request, &response).ok());
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  const ShardDef a_ = MakeShardDef("a", 0, {4, 2}, 0, 4, ConstantInit(2.0f));
  const ShardDef b_ = MakeShardDef("b", 0, {3}, 0, 3, ConstantInit(5.0f));
  const std::vector<std::string> names_ = {"a/part_0", "b/part_0"};
};

TEST_P(PsClientSplitTest, SplitPullAndPushAreTheBlockingCalls) {
  std::vector<float> a(8, -1.0f), b(3, -1.0f);
  const std::vector<absl::Span<float>> out = {absl::MakeSpan(a),
                                              absl::MakeSpan(b)};
  std::vector<int64_t> versions;
  std::unique_ptr<PsClient::Pending> pull =
      client_->BeginPullDense(names_, out, &versions);
  ASSERT_TRUE(pull->Finish().ok());
  EXPECT_THAT(a, Each(2.0f));
  EXPECT_THAT(b, Each(5.0f));
  EXPECT_EQ(versions, (std::vector<int64_t>{0, 0}));

  const std::vector<float> ga(8, 0.5f), gb(3, 1.0f);
  const std::vector<absl::Span<const float>> grads = {absl::MakeConstSpan(ga),
                                                      absl::MakeConstSpan(gb)};
  PushResponse pushed;
  std::unique_ptr<PsClient::Pending> push =
      client_->BeginPushDense(names_, grads, versions, &pushed);
  ASSERT_TRUE(push->Finish().ok());
  EXPECT_EQ(pushed.applied_size(), 2);

  // SGD at rate 1: value - gradient, at version 1, read back blocking.
  ASSERT_TRUE(client_->PullDense(names_, out, &versions).ok());
  EXPECT_THAT(a, Each(1.5f));
  EXPECT_THAT(b, Each(4.0f));
  EXPECT_EQ(versions, (std::vector<int64_t>{1, 1}));
}

TEST_P(PsClientSplitTest, SeveralCallsInFlightAtOnce) {
  // Two pulls begun before either is finished, finished in reverse order.
  std::vector<float> a1(8), a2(8);
  const std::vector<std::string> only_a = {"a/part_0"};
  const std::vector<absl::Span<float>> out1 = {absl::MakeSpan(a1)};
  const std::vector<absl::Span<float>> out2 = {absl::MakeSpan(a2)};
  std::unique_ptr<PsClient::Pending> first =
      client_->BeginPullDense(only_a, out1, nullptr);
  std::unique_ptr<PsClient::Pending> second =
      client_->BeginPullDense(only_a, out2, nullptr);
  ASSERT_TRUE(second->Finish().ok());
  ASSERT_TRUE(first->Finish().ok());
  EXPECT_THAT(a1, Each(2.0f));
  EXPECT_THAT(a2, Each(2.0f));
}

TEST_P(PsClientSplitTest, WrongSizesAreRefusedAtFinish) {
  std::vector<float> a(8);
  const std::vector<absl::Span<float>> out = {absl::MakeSpan(a)};
  absl::Status s = client_->BeginPullDense(names_, out, nullptr)->Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("2 shards but 1 destinations"));

  PushResponse pushed;
  const std::vector<float> g(8);
  const std::vector<absl::Span<const float>> grads = {absl::MakeConstSpan(g)};
  s = client_->BeginPushDense(names_, grads, {}, &pushed)->Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST_P(PsClientSplitTest, UnknownShardIsTheServersError) {
  std::vector<float> v(3);
  const std::vector<std::string> names = {"nope/part_0"};
  const std::vector<absl::Span<float>> out = {absl::MakeSpan(v)};
  absl::Status split = client_->BeginPullDense(names, out, nullptr)->Finish();
  absl::Status blocking = client_->PullDense(names, out, nullptr);
  EXPECT_FALSE(split.ok());
  EXPECT_EQ(split.code(), blocking.code()) << split << " / " << blocking;
  EXPECT_THAT(split.message(), HasSubstr("nope/part_0"));
}

TEST_P(PsClientSplitTest, AnUnfinishedCallLeavesTheClientUsable) {
  std::vector<float> a(8);
  const std::vector<std::string> only_a = {"a/part_0"};
  const std::vector<absl::Span<float>> out = {absl::MakeSpan(a)};
  client_->BeginPullDense(only_a, out, nullptr).reset();  // never finished
  std::fill(a.begin(), a.end(), 0.0f);
  ASSERT_TRUE(client_->PullDense(only_a, out, nullptr).ok());
  EXPECT_THAT(a, Each(2.0f));
}

TEST_P(PsClientSplitTest, ServerDownIsUnavailableAtFinish) {
  // A port nothing listens on: the gRPC server's, once it is gone.
  std::string address;
  {
    ps_test::TestPsServer gone;
    address = gone.address();
  }
  PsClientOptions options;
  options.timeout_s = 5;
  options.data_plane = GetParam();
  PsClient client(address, 3, MakeChannel(address, ChannelSecurity()), options);
  std::vector<float> a(8);
  const std::vector<std::string> only_a = {"a/part_0"};
  const std::vector<absl::Span<float>> out = {absl::MakeSpan(a)};
  absl::Status s = client.BeginPullDense(only_a, out, nullptr)->Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps 3"));
}

INSTANTIATE_TEST_SUITE_P(Transports, PsClientSplitTest,
                         ::testing::Values(DataPlaneKind::kGrpc,
                                           DataPlaneKind::kTcp),
                         [](const auto& info) {
                           return std::string(DataPlaneName(info.param));
                         });

}  // namespace
}  // namespace tessera
