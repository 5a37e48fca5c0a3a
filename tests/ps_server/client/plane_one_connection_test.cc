// A worker's data-plane traffic to one parameter server travels on one
// connection (#46): dense pulls and pushes, their split halves and row
// pulls and pushes, from several threads at once, cost the server one
// accepted connection; calls on it are pipelined and all succeed. A split
// call dropped unfinished has its reply read into scratch: the connection
// stays in step and is kept.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/data_plane/data_plane_kind.h"
#include "ps_server/client/ps_client.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::ConstantInit;
using ps_test::MakeShardDef;
using ps_test::SgdConfig;

constexpr int64_t kDim = 4;

class PlaneOneConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient(DataPlaneKind::kTcp);
    CreateShardsRequest request;
    *request.add_shards() = dense_;
    *request.add_shards() = table_;
    *request.mutable_optimizer() = SgdConfig(1.0f);
    CreateShardsResponse response;
    ASSERT_TRUE(client_->CreateShards(request, &response).ok());
  }

  // One step's worth of every kind of call; the gradients are 0, so the
  // values stay the initial ones.
  absl::Status Step(int thread) {
    std::vector<float> values(64, -1.0f);
    const std::vector<absl::Span<float>> out = {absl::MakeSpan(values)};
    const std::vector<std::string> names = {dense_.name()};
    if (absl::Status s = client_->PullDense(names, out, nullptr); !s.ok()) {
      return s;
    }
    if (values != std::vector<float>(64, 2.0f)) {
      return absl::InternalError("wrong dense values");
    }
    const std::vector<float> grad(64, 0.0f);
    const std::vector<absl::Span<const float>> grads = {grad};
    PushResponse pushed;
    if (absl::Status s = client_->PushDense(names, grads, {}, &pushed);
        !s.ok()) {
      return s;
    }
    std::unique_ptr<PsClient::Pending> split =
        client_->BeginPullDense(names, out, nullptr);
    if (absl::Status s = split->Finish(); !s.ok()) return s;
    const std::vector<int64_t> ids = {thread, 7, 199 - thread};
    std::vector<float> rows(ids.size() * kDim, -1.0f);
    if (absl::Status s =
            client_->PullRows(table_.name(), ids, kDim, absl::MakeSpan(rows));
        !s.ok()) {
      return s;
    }
    if (rows != std::vector<float>(rows.size(), 3.0f)) {
      return absl::InternalError("wrong rows");
    }
    const std::vector<float> row_grads(rows.size(), 0.0f);
    return client_->PushRows(table_.name(), ids, kDim, row_grads, &pushed);
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  const ShardDef dense_ =
      MakeShardDef("w", 0, {16, 4}, 0, 16, ConstantInit(2.0f));
  const ShardDef table_ =
      MakeShardDef("emb", 0, {200, kDim}, 0, 200, ConstantInit(3.0f));
};

TEST_F(PlaneOneConnectionTest, EveryKindOfCallFromManyThreadsSharesOne) {
  constexpr int kThreads = 6;
  std::vector<absl::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &results] {
      for (int step = 0; step < 30 && results[t].ok(); ++step) {
        results[t] = Step(t);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(server_.data_plane_connections(), 1);
}

TEST_F(PlaneOneConnectionTest, ASplitCallDroppedUnfinishedKeepsTheConnection) {
  ASSERT_TRUE(Step(0).ok());
  std::vector<float> values(64);
  const std::vector<absl::Span<float>> out = {absl::MakeSpan(values)};
  const std::vector<std::string> names = {dense_.name()};
  // Its reply is read into scratch by the next call, not into `values`.
  client_->BeginPullDense(names, out, nullptr).reset();
  values.assign(values.size(), -7.0f);
  absl::Status s = Step(1);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(values, std::vector<float>(64, -7.0f));
  EXPECT_EQ(server_.data_plane_connections(), 1);
}

}  // namespace
}  // namespace tessera
