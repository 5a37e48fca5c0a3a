// PullDense and PushDense of ParameterServerService on a loopback port,
// through PsClient, over gRPC with 4 KiB chunks and over the TCP data plane.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/data_plane/data_plane_kind.h"
#include "common/rpc/grpc_channel.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps_server/client/ps_client.h"
#include "ps_server/wire/push_size.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::ConstantInit;
using ps_test::GlorotInit;
using ps_test::InitialValues;
using ps_test::MakeShardDef;
using ps_test::SgdConfig;
using ps_test::ZerosInit;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

class PsServiceDenseTest : public ::testing::TestWithParam<DataPlaneKind> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient(GetParam());
  }

  // Creates the shards with SGD at `learning_rate`.
  void CreateShards(const std::vector<ShardDef>& defs, float learning_rate) {
    CreateShardsRequest request;
    for (const ShardDef& def : defs) *request.add_shards() = def;
    *request.mutable_optimizer() = SgdConfig(learning_rate);
    CreateShardsResponse response;
    absl::Status status = client_->CreateShards(request, &response);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(response.created(), static_cast<int>(defs.size()));
  }

  // Pulls the shards; values[i] receives shard i.
  absl::Status Pull(const std::vector<ShardDef>& defs,
                    std::vector<std::vector<float>>* values,
                    std::vector<int64_t>* versions = nullptr) {
    std::vector<std::string> names;
    values->clear();
    for (const ShardDef& def : defs) {
      names.push_back(def.name());
      values->emplace_back(ps_test::NumElements(def), -123.0f);
    }
    std::vector<absl::Span<float>> out;
    for (auto& v : *values) out.push_back(absl::MakeSpan(v));
    return client_->PullDense(names, out, versions);
  }

  absl::Status Push(const std::vector<std::string>& names,
                    const std::vector<std::vector<float>>& grads,
                    PushResponse* response = nullptr) {
    std::vector<absl::Span<const float>> spans;
    for (const auto& g : grads) spans.push_back(absl::MakeConstSpan(g));
    PushResponse ignored;
    return client_->PushDense(names, spans, {},
                              response != nullptr ? response : &ignored);
  }

  // Expects the shards to hold their initial values at version 0.
  void ExpectUnchanged(const std::vector<ShardDef>& defs) {
    std::vector<std::vector<float>> values;
    std::vector<int64_t> versions;
    absl::Status status = Pull(defs, &values, &versions);
    ASSERT_TRUE(status.ok()) << status;
    for (size_t i = 0; i < defs.size(); ++i) {
      EXPECT_EQ(versions[i], 0) << defs[i].name();
      EXPECT_THAT(values[i], ElementsAreArray(InitialValues(defs[i])))
          << defs[i].name();
    }
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  // 10000 floats: 40000 bytes, ten 4 KiB chunks.
  const ShardDef big_ =
      MakeShardDef("big", 1, {3000, 5}, 1000, 2000, GlorotInit(3000, 5, 11));
  const ShardDef tiny_ = MakeShardDef("tiny", 0, {3}, 0, 3, ConstantInit(0.5f));
  const ShardDef scalar_ =
      MakeShardDef("scalar", 0, {}, 0, 0, ConstantInit(7.0f));
};

TEST_P(PsServiceDenseTest, PullReturnsInitialValues) {
  ASSERT_EQ(ps_test::NumElements(big_), 10000);
  CreateShards({big_, tiny_, scalar_}, 0.1f);
  ExpectUnchanged({big_, tiny_, scalar_});
  // Another order, and a shard twice in one request.
  ExpectUnchanged({scalar_, big_, tiny_, big_});
}

TEST_P(PsServiceDenseTest, PushThenPullGivesSgdUpdate) {
  CreateShards({big_, tiny_, scalar_}, 0.5f);
  std::vector<float> g_big(10000);
  for (int i = 0; i < 10000; ++i) g_big[i] = static_cast<float>(i % 13) - 6.0f;
  PushResponse response;
  absl::Status status = Push({big_.name(), tiny_.name(), scalar_.name()},
                             {g_big, {1.0f, -2.0f, 4.0f}, {3.0f}}, &response);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(response.applied_size(), 3);
  EXPECT_EQ(response.applied(0).name(), big_.name());
  EXPECT_EQ(response.applied(0).version(), 1);
  EXPECT_EQ(response.applied(2).version(), 1);

  std::vector<float> expected_big = InitialValues(big_);
  for (int i = 0; i < 10000; ++i) expected_big[i] -= 0.5f * g_big[i];
  std::vector<std::vector<float>> values;
  std::vector<int64_t> versions;
  status = Pull({big_, tiny_, scalar_}, &values, &versions);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(versions, ElementsAreArray({1, 1, 1}));
  EXPECT_THAT(values[0], ElementsAreArray(expected_big));
  EXPECT_THAT(values[1], ElementsAreArray({0.0f, 1.5f, -1.5f}));
  EXPECT_THAT(values[2], ElementsAreArray({5.5f}));
}

TEST_P(PsServiceDenseTest, WrongShapePushIsRefused) {
  CreateShards({tiny_, big_}, 0.1f);
  absl::Status status = Push({tiny_.name()}, {{1.0f, 2.0f}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("wrong shape"));
  EXPECT_THAT(status.message(), HasSubstr(tiny_.name()));
  // A valid shard first does not get applied either.
  status = Push({big_.name(), tiny_.name()},
                {std::vector<float>(10000, 1.0f), {1.0f, 2.0f, 3.0f, 4.0f}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("wrong shape"));
  ExpectUnchanged({tiny_, big_});
}

TEST_P(PsServiceDenseTest, UnknownShardIsNotFound) {
  CreateShards({tiny_}, 0.1f);
  const ShardDef unknown = MakeShardDef("ghost", 2, {3}, 0, 3, ZerosInit());
  std::vector<std::vector<float>> values;
  absl::Status status = Pull({tiny_, unknown}, &values);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("ghost/part_2"));

  status = Push({tiny_.name(), "ghost/part_2"}, {{1, 1, 1}, {1, 1, 1}});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("ghost/part_2"));
  ExpectUnchanged({tiny_});
}

// A stream with a valid gradient of `other`, then one of `big_` whose third
// chunk holds a NaN or an infinity: refused, and neither shard changes.
TEST_P(PsServiceDenseTest, NonFiniteGradientChangesNothing) {
  const ShardDef other =
      MakeShardDef("other", 0, {2000, 5}, 0, 2000, GlorotInit(2000, 5, 3));
  CreateShards({big_, other}, 0.1f);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(bad);
    std::vector<float> poisoned(10000, 0.25f);
    // 1024 floats per 4 KiB chunk: element 2100 is in the third chunk.
    poisoned[2100] = bad;
    absl::Status status = Push({other.name(), big_.name()},
                               {std::vector<float>(10000, 1.0f), poisoned});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("non-finite"));
    EXPECT_THAT(status.message(), HasSubstr(big_.name()));
    EXPECT_THAT(status.message(), HasSubstr("2100"));
    ExpectUnchanged({big_, other});
  }
}

TEST_P(PsServiceDenseTest, TruncatedStreamChangesNothing) {
  CreateShards({big_}, 0.1f);
  std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
      MakeChannel(server_.address(), ChannelSecurity()));
  grpc::ClientContext context;
  DeclarePushSize({1, 40000}, &context);
  PushResponse response;
  std::unique_ptr<grpc::ClientWriter<TensorChunk>> writer =
      stub->PushDense(&context, &response);
  TensorChunk chunk;
  chunk.set_name(big_.name());
  chunk.set_total_bytes(40000);
  chunk.set_offset(0);
  chunk.mutable_data()->assign(4096, '\0');
  ASSERT_TRUE(writer->Write(chunk));
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr(big_.name()));
  ExpectUnchanged({big_});
}

TEST_P(PsServiceDenseTest, ContinuationChunkWithWrongTotalIsRefused) {
  const ShardDef two_chunks =
      MakeShardDef("two", 0, {2048}, 0, 2048, ZerosInit());
  CreateShards({two_chunks}, 0.1f);
  std::unique_ptr<ParameterServer::Stub> stub = ParameterServer::NewStub(
      MakeChannel(server_.address(), ChannelSecurity()));
  grpc::ClientContext context;
  DeclarePushSize({1, 8192}, &context);
  PushResponse response;
  std::unique_ptr<grpc::ClientWriter<TensorChunk>> writer =
      stub->PushDense(&context, &response);
  TensorChunk chunk;
  chunk.set_name(two_chunks.name());
  chunk.set_total_bytes(8192);
  chunk.set_offset(0);
  chunk.mutable_data()->assign(4096, '\0');
  writer->Write(chunk);
  chunk.set_total_bytes(1 << 20);  // contradicts the shard's 8192 bytes
  chunk.set_offset(4096);
  writer->Write(chunk);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("1048576"));
  ExpectUnchanged({two_chunks});
}

TEST_P(PsServiceDenseTest, ConcurrentPushesLoseNoUpdate) {
  constexpr int kThreads = 8;
  constexpr int kPushes = 50;
  constexpr int kElements = 3000;  // 12000 bytes: three chunks per push
  const ShardDef shared =
      MakeShardDef("shared", 0, {kElements}, 0, kElements, ZerosInit());
  CreateShards({shared}, 1.0f);

  std::vector<std::vector<int64_t>> versions(kThreads);
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Thread t pushes g[i] = (t + 1) + i % 7: small integers, so every
      // partial sum is exact in float and the order does not matter.
      std::vector<float> grad(kElements);
      for (int i = 0; i < kElements; ++i) grad[i] = (t + 1) + (i % 7);
      for (int k = 0; k < kPushes; ++k) {
        PushResponse response;
        absl::Status status = Push({shared.name()}, {grad}, &response);
        if (!status.ok() || response.applied_size() != 1) {
          ++failures[t];
          continue;
        }
        versions[t].push_back(response.applied(0).version());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  std::set<int64_t> all_versions;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t;
    all_versions.insert(versions[t].begin(), versions[t].end());
  }
  // Every push got its own version: 1..400.
  EXPECT_EQ(all_versions.size(), static_cast<size_t>(kThreads * kPushes));
  EXPECT_EQ(*all_versions.begin(), 1);
  EXPECT_EQ(*all_versions.rbegin(), kThreads * kPushes);

  std::vector<std::vector<float>> values;
  std::vector<int64_t> pulled_versions;
  absl::Status status = Pull({shared}, &values, &pulled_versions);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(pulled_versions[0], kThreads * kPushes);
  // w = -sum over pushes of g = -(50 * (1 + ... + 8) + 400 * (i % 7)).
  std::vector<float> expected(kElements);
  for (int i = 0; i < kElements; ++i) {
    expected[i] = -(kPushes * 36.0f + kThreads * kPushes * (i % 7));
  }
  EXPECT_THAT(values[0], ElementsAreArray(expected));
}

// Every case runs on both planes: the gRPC calls, and the TCP data plane
// the same server announces (the raw-stream cases drive gRPC directly and
// hold on both).
INSTANTIATE_TEST_SUITE_P(
    Planes, PsServiceDenseTest,
    ::testing::Values(DataPlaneKind::kGrpc, DataPlaneKind::kTcp),
    [](const ::testing::TestParamInfo<DataPlaneKind>& info) {
      return std::string(DataPlaneName(info.param));
    });

}  // namespace
}  // namespace tessera
