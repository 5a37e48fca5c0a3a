// RowExchange against two real parameter servers on loopback: a batch's
// ids mapped to distinct rows and pulled from the shards that hold them,
// and the gradients pushed back along the pull's routes (or routed anew),
// in the step or left in flight.

#include "worker/params/row_exchange.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/initializer.h"
#include "common/model/model_graph.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ps_server/ps_test_util.h"
#include "tests/worker/nn/graph_test_util.h"
#include "worker/backend/cpu/cpu_backend.h"

// Named, so the file's names do not meet another test's in a unity build
// (TESSERA_UNITY_TESTS).
namespace tessera::row_exchange_test {
namespace {

using ps_test::TestPsServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kVocab = 10;
constexpr int64_t kDim = 4;

constexpr char kModel[] = R"pb(
  inputs {
    name: "a"
    sparse { max_hotness: 3 vocab_size: 10 }
  }
  label { kind: BINARY }
  layers {
    name: "ea"
    inputs: "a"
    embedding_bag { table: "fixed" dim: 4 }
  }
  layers {
    name: "out"
    inputs: "ea"
    dense { units: 1 }
  }
  loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
)pb";

// Row `row` of the table as the servers create it.
std::vector<float> InitialRow(int64_t row) {
  std::vector<float> out(kDim);
  FillInitialValues(ps_test::UniformInit(7, 1.0f), row * kDim,
                    absl::MakeSpan(out));
  return out;
}

class RowExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The div layout of 10 rows over 2 shards: [0, 5) on ps 0, [5, 10) on 1.
    VariablePlacement* p = placements_.Add();
    p->set_name("fixed");
    p->mutable_shape()->add_dims(kVocab);
    p->mutable_shape()->add_dims(kDim);
    for (int k = 0; k < 2; ++k) {
      servers_.push_back(std::make_unique<TestPsServer>());
      ASSERT_TRUE(servers_[k]->started());
      clients_.push_back(servers_[k]->NewClient());
      CreateShardsRequest request;
      *request.mutable_optimizer() = ps_test::SgdConfig(1.0f);
      *request.add_shards() = ps_test::MakeShardDef(
          "fixed", k, {kVocab, kDim}, 5 * k, 5, ps_test::UniformInit(7, 1.0f));
      CreateShardsResponse response;
      ASSERT_TRUE(clients_[k]->CreateShards(request, &response).ok());
      ShardPlacement* s = p->add_shards();
      s->set_name(absl::StrCat("fixed/part_", k));
      s->set_row_offset(5 * k);
      s->set_rows(5);
      s->set_ps_task(k);
    }
    absl::StatusOr<ModelGraph> model = BuildModelGraph(Parse(kModel), 1);
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<std::unique_ptr<Graph>> graph = Graph::Create(*model, &cpu_);
    ASSERT_TRUE(graph.ok()) << graph.status();
    graph_ = *std::move(graph);
    // Two examples: ids 1, 7, 1 and 9, 17 (17 is row 7).
    batch_.size = 2;
    batch_.offsets = {{0, 3, 5}};
    batch_.ids = {{1, 7, 1, 9, 17}};
    batch_.labels = {0, 1};
  }

  // Options for the served table: none kept in a replica.
  RowExchange::Options Served() {
    RowExchange::Options o;
    o.graph = graph_.get();
    absl::StatusOr<ReplicatedTables> kept =
        ReplicatedTables::Create(graph_->tables(), {});
    EXPECT_TRUE(kept.ok()) << kept.status();
    if (kept.ok()) o.kept = *std::move(kept);
    o.servers = true;
    o.placements = &placements_;
    o.clients = {clients_[0].get(), clients_[1].get()};
    o.host_memory = &cpu_;
    return o;
  }

  std::unique_ptr<RowExchange> Make(int pushes_in_flight = 0) {
    RowExchange::Options o = Served();
    o.pushes_in_flight = pushes_in_flight;
    absl::StatusOr<std::unique_ptr<RowExchange>> exchange =
        RowExchange::Create(std::move(o));
    EXPECT_TRUE(exchange.ok()) << exchange.status();
    return exchange.ok() ? *std::move(exchange) : nullptr;
  }

  // Row `row` as the servers hold it now.
  std::vector<float> ServedRow(int64_t row) {
    const int k = static_cast<int>(row / 5);
    std::vector<float> shard(5 * kDim);
    EXPECT_TRUE(clients_[k]
                    ->PullDense({absl::StrCat("fixed/part_", k)},
                                {absl::MakeSpan(shard)}, nullptr)
                    .ok());
    const int64_t r = row % 5;
    return {shard.begin() + r * kDim, shard.begin() + (r + 1) * kDim};
  }

  CpuBackend cpu_;
  std::vector<std::unique_ptr<TestPsServer>> servers_;
  std::vector<std::unique_ptr<PsClient>> clients_;
  google::protobuf::RepeatedPtrField<VariablePlacement> placements_;
  std::unique_ptr<Graph> graph_;
  HostBatch batch_;
};

TEST_F(RowExchangeTest, PullsTheDistinctRowsFromTheShardsThatHoldThem) {
  std::unique_ptr<RowExchange> exchange = Make();
  ASSERT_NE(exchange, nullptr);
  ASSERT_TRUE(exchange->StartPull(batch_, std::nullopt).get().ok());
  // Rows 1, 7 and 9, on both servers; each id's row among them.
  EXPECT_THAT(exchange->positions()[0], ElementsAre(0, 1, 0, 2, 1));
  const absl::Span<const float> pulled = exchange->pulled()[0];
  ASSERT_EQ(pulled.size(), 3 * kDim);
  const int64_t rows[] = {1, 7, 9};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(std::vector<float>(pulled.begin() + i * kDim,
                                 pulled.begin() + (i + 1) * kDim),
              InitialRow(rows[i]))
        << "row " << rows[i];
  }
}

TEST_F(RowExchangeTest, PushesAlongThePullsRoutesOrRoutesAnew) {
  std::unique_ptr<RowExchange> exchange = Make();
  ASSERT_NE(exchange, nullptr);
  ASSERT_TRUE(exchange->Pull(batch_).ok());
  // One gradient per pulled row, in order: the pull's routes (SGD,
  // learning rate 1).
  (*exchange->gradients())[0] = {{0, 1, 2}, std::vector<float>(3 * kDim)};
  for (int i = 0; i < 3 * kDim; ++i) {
    (*exchange->gradients())[0].values[i] = 0.5f * (i / kDim + 1);
  }
  ASSERT_TRUE(exchange->StartPush(1, nullptr).get().ok());
  const int64_t rows[] = {1, 7, 9};
  for (int i = 0; i < 3; ++i) {
    std::vector<float> expected = InitialRow(rows[i]);
    for (float& x : expected) x -= 0.5f * (i + 1);
    EXPECT_EQ(ServedRow(rows[i]), expected) << "row " << rows[i];
  }
  EXPECT_EQ(ServedRow(2), InitialRow(2));
  // Only row 9 (index 2) this time: routed anew, scaled as a sync part.
  ASSERT_TRUE(exchange->Pull(batch_).ok());
  (*exchange->gradients())[0] = {{2}, std::vector<float>(kDim, 1.0f)};
  std::vector<float> nine = ServedRow(9);
  ASSERT_TRUE(exchange->StartPush(0.25f, nullptr).get().ok());
  for (float& x : nine) x -= 0.25f;
  EXPECT_EQ(ServedRow(9), nine);
  EXPECT_EQ(ServedRow(1)[0], InitialRow(1)[0] - 0.5f);
}

TEST_F(RowExchangeTest, PushLeftInFlightLandsByWaitForPushes) {
  std::unique_ptr<RowExchange> exchange = Make(/*pushes_in_flight=*/1);
  ASSERT_NE(exchange, nullptr);
  ASSERT_TRUE(exchange->StartPull(batch_, std::nullopt).get().ok());
  (*exchange->gradients())[0] = {{0, 1, 2}, std::vector<float>(3 * kDim, 1)};
  EXPECT_FALSE(exchange->StartPush(1, nullptr).valid());
  ASSERT_TRUE(exchange->WaitForPushes(0).ok());
  for (int64_t row : {1, 7, 9}) {
    std::vector<float> expected = InitialRow(row);
    for (float& x : expected) x -= 1;
    EXPECT_EQ(ServedRow(row), expected) << "row " << row;
  }
}

TEST_F(RowExchangeTest, RefusesAGradientOfTheWrongSize) {
  std::unique_ptr<RowExchange> exchange = Make();
  ASSERT_NE(exchange, nullptr);
  ASSERT_TRUE(exchange->Pull(batch_).ok());
  (*exchange->gradients())[0] = {{0, 1, 2}, std::vector<float>(kDim)};
  absl::Status s = exchange->StartPush(1, nullptr).get();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("table fixed"));
  EXPECT_EQ(ServedRow(1), InitialRow(1));
}

TEST_F(RowExchangeTest, RefusesAPlacementOutsideTheDivLayout) {
  placements_.Mutable(0)->mutable_shards(0)->set_rows(4);
  placements_.Mutable(0)->mutable_shards(1)->set_row_offset(4);
  placements_.Mutable(0)->mutable_shards(1)->set_rows(6);
  absl::StatusOr<std::unique_ptr<RowExchange>> exchange =
      RowExchange::Create(Served());
  EXPECT_EQ(exchange.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(exchange.status().message(), HasSubstr("div layout"));
}

}  // namespace
}  // namespace tessera::row_exchange_test
