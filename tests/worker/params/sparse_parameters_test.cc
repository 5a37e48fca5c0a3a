// SparseParameters against two real parameter servers on loopback: id
// mapping and deduplication, routing of fixed (div layout) and growing
// (HashShardOf) tables, sparse pushes landing on the right rows, and the
// bad inputs.

#include "worker/params/sparse_parameters.h"

#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/initializer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partitioners/hash_routing.h"
#include "ps_server/hash_table.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ps_test::TestPsServer;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int64_t kVocab = 10;
constexpr int64_t kDim = 4;

Initializer UniformInit(uint64_t seed) {
  Initializer init;
  init.set_kind(Initializer::UNIFORM);
  init.set_minval(-1);
  init.set_maxval(1);
  init.set_seed(seed);
  return init;
}

VariablePlacement FixedPlacement() {
  // The div layout of 10 rows over 2 shards: [0, 5) on ps 0, [5, 10) on 1.
  VariablePlacement p;
  p.set_name("fixed");
  p.mutable_shape()->add_dims(kVocab);
  p.mutable_shape()->add_dims(kDim);
  for (int k = 0; k < 2; ++k) {
    ShardPlacement* s = p.add_shards();
    s->set_name(absl::StrCat("fixed/part_", k));
    s->set_row_offset(5 * k);
    s->set_rows(5);
    s->set_ps_task(k);
  }
  return p;
}

VariablePlacement HashPlacement() {
  VariablePlacement p;
  p.set_name("grow");
  p.mutable_shape()->add_dims(0);
  p.mutable_shape()->add_dims(kDim);
  p.set_hash_table(true);
  for (int k = 0; k < 2; ++k) {
    ShardPlacement* s = p.add_shards();
    s->set_name(absl::StrCat("grow/part_", k));
    s->set_ps_task(k);
  }
  return p;
}

class SparseParametersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int k = 0; k < 2; ++k) {
      servers_.push_back(std::make_unique<TestPsServer>());
      ASSERT_TRUE(servers_[k]->started());
      clients_.push_back(servers_[k]->NewClient());
      CreateShardsRequest request;
      *request.mutable_optimizer() = ps_test::SgdConfig(1.0f);
      *request.add_shards() = ps_test::MakeShardDef("fixed", k, {kVocab, kDim},
                                                    5 * k, 5, UniformInit(7));
      ShardDef* hash = request.add_shards();
      hash->set_name(absl::StrCat("grow/part_", k));
      hash->set_variable("grow");
      hash->set_index(k);
      hash->set_dtype(DT_FLOAT);
      hash->set_hash_table(true);
      hash->set_dim(kDim);
      hash->set_num_shards(2);
      *hash->mutable_initializer() = UniformInit(9);
      CreateShardsResponse response;
      ASSERT_TRUE(clients_[k]->CreateShards(request, &response).ok());
    }
    tables_ = {VariableDef{"fixed", {kVocab, kDim}, UniformInit(7), true},
               VariableDef{"grow", {0, kDim}, UniformInit(9), true}};
    *placements_.Add() = FixedPlacement();
    *placements_.Add() = HashPlacement();
  }

  std::unique_ptr<SparseParameters> Make() {
    absl::StatusOr<std::unique_ptr<SparseParameters>> p =
        SparseParameters::Create(tables_, placements_,
                                 {clients_[0].get(), clients_[1].get()});
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }

  // Row `row` of the fixed table as created.
  static std::vector<float> FixedInitialRow(int64_t row) {
    std::vector<float> out(kDim);
    FillInitialValues(UniformInit(7), row * kDim, absl::MakeSpan(out));
    return out;
  }

  std::vector<std::unique_ptr<TestPsServer>> servers_;
  std::vector<std::unique_ptr<PsClient>> clients_;
  std::vector<VariableDef> tables_;
  google::protobuf::RepeatedPtrField<VariablePlacement> placements_;
};

// Sizes *values for `rows` and pulls them: the buffers a worker keeps.
absl::Status PullInto(SparseParameters& p,
                      const std::vector<std::vector<int64_t>>& rows,
                      std::vector<std::vector<float>>* values) {
  values->assign(rows.size(), {});
  std::vector<absl::Span<float>> spans;
  for (size_t t = 0; t < rows.size(); ++t) {
    (*values)[t].resize(
        rows[t].size() *
        (t < static_cast<size_t>(p.num_tables()) ? p.dim(t) : 0));
    spans.push_back(absl::MakeSpan((*values)[t]));
  }
  return p.Pull(rows, spans);
}

TEST_F(SparseParametersTest, LocalizeMapsFixedIdsModVocabAndDeduplicates) {
  std::unique_ptr<SparseParameters> p = Make();
  ASSERT_NE(p, nullptr);
  std::vector<int64_t> unique, positions;
  // 13 and -7 land on row 3 as 3 does (floor modulo); 25 on row 5.
  p->Localize(0, {3, 13, -7, 3, 25}, &unique, &positions);
  EXPECT_THAT(unique, ElementsAre(3, 5));
  EXPECT_THAT(positions, ElementsAre(0, 0, 0, 0, 1));
  // A growing table keeps ids as they are.
  p->Localize(1, {5, 1000003, 5, -1}, &unique, &positions);
  EXPECT_THAT(unique, ElementsAre(-1, 5, 1000003));
  EXPECT_THAT(positions, ElementsAre(1, 2, 1, 0));
}

TEST_F(SparseParametersTest, PullsFixedRowsFromTheirShardsAndPushesThere) {
  std::unique_ptr<SparseParameters> p = Make();
  ASSERT_NE(p, nullptr);
  const std::vector<std::vector<int64_t>> rows = {{1, 7, 9}, {}};
  std::vector<std::vector<float>> values;
  ASSERT_TRUE(PullInto(*p, rows, &values).ok());
  ASSERT_EQ(values[0].size(), 3 * kDim);
  for (int i = 0; i < 3; ++i) {
    std::vector<float> got(values[0].begin() + i * kDim,
                           values[0].begin() + (i + 1) * kDim);
    EXPECT_THAT(got, ElementsAreArray(FixedInitialRow(rows[0][i])))
        << "row " << rows[0][i];
  }
  // SGD with learning rate 1: a pushed row drops by its gradient, the rest
  // of each shard stays as it was.
  std::vector<std::vector<float>> grads = {std::vector<float>(3 * kDim), {}};
  for (int i = 0; i < 3 * kDim; ++i) grads[0][i] = 0.5f * (i / kDim + 1);
  ASSERT_TRUE(p->Push(rows, grads).ok());
  for (int k = 0; k < 2; ++k) {
    std::vector<float> shard(5 * kDim);
    ASSERT_TRUE(clients_[k]
                    ->PullDense({absl::StrCat("fixed/part_", k)},
                                {absl::MakeSpan(shard)}, nullptr)
                    .ok());
    for (int r = 0; r < 5; ++r) {
      const int64_t row = 5 * k + r;
      float delta = 0;
      for (int i = 0; i < 3; ++i) {
        if (rows[0][i] == row) delta = 0.5f * (i + 1);
      }
      const std::vector<float> init = FixedInitialRow(row);
      for (int d = 0; d < kDim; ++d) {
        EXPECT_FLOAT_EQ(shard[r * kDim + d], init[d] - delta)
            << "row " << row << " element " << d;
      }
    }
  }
}

TEST_F(SparseParametersTest, RoutesHashIdsWithHashShardOf) {
  std::unique_ptr<SparseParameters> p = Make();
  ASSERT_NE(p, nullptr);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 200; ++i) ids.push_back(i * 7919 - 500);
  std::vector<int64_t> unique, positions;
  p->Localize(1, ids, &unique, &positions);
  std::vector<std::vector<float>> values;
  // A shard refuses an id HashShardOf routes elsewhere, so this succeeding
  // means every id went to its own shard.
  ASSERT_TRUE(PullInto(*p, {{}, unique}, &values).ok());
  for (size_t i = 0; i < unique.size(); ++i) {
    std::vector<float> expected(kDim);
    HashRowInitialValues(UniformInit(9), unique[i], absl::MakeSpan(expected));
    std::vector<float> got(values[1].begin() + i * kDim,
                           values[1].begin() + (i + 1) * kDim);
    EXPECT_THAT(got, ElementsAreArray(expected)) << "id " << unique[i];
  }
  int64_t on_zero = 0;
  for (int64_t id : unique) on_zero += HashShardOf(id, 2) == 0;
  ASSERT_GT(on_zero, 0);
  ASSERT_LT(on_zero, static_cast<int64_t>(unique.size()));
  // Each server's shard holds exactly the ids routed to it.
  absl::StatusOr<std::shared_ptr<RowTable>> zero =
      servers_[0]->store().FindRows("grow/part_0");
  absl::StatusOr<std::shared_ptr<RowTable>> one =
      servers_[1]->store().FindRows("grow/part_1");
  ASSERT_TRUE(zero.ok() && one.ok());
  EXPECT_EQ(static_cast<HashTable*>(zero->get())->rows(), on_zero);
  EXPECT_EQ(static_cast<HashTable*>(one->get())->rows(),
            static_cast<int64_t>(unique.size()) - on_zero);
  // A pushed row moves by its gradient (SGD, learning rate 1).
  std::vector<std::vector<float>> grads = {
      {}, std::vector<float>(unique.size() * kDim, 0.25f)};
  ASSERT_TRUE(p->Push({{}, unique}, grads).ok());
  std::vector<std::vector<float>> after;
  ASSERT_TRUE(PullInto(*p, {{}, unique}, &after).ok());
  for (size_t i = 0; i < values[1].size(); ++i) {
    EXPECT_FLOAT_EQ(after[1][i], values[1][i] - 0.25f);
  }
}

TEST_F(SparseParametersTest, PushAlongThePullsRoutesMovesThePulledRows) {
  std::unique_ptr<SparseParameters> p = Make();
  ASSERT_NE(p, nullptr);
  // Rows of both tables, on both servers: the pull keeps their routes.
  const std::vector<std::vector<int64_t>> rows = {{8, 2}, {11, -4, 600}};
  std::vector<std::vector<float>> values = {std::vector<float>(2 * kDim),
                                            std::vector<float>(3 * kDim)};
  SparseParameters::Routes routes;
  ASSERT_TRUE(p->Pull(rows,
                      {absl::MakeSpan(values[0]), absl::MakeSpan(values[1])},
                      std::nullopt, &routes)
                  .ok());
  EXPECT_EQ(routes.rows, (std::vector<size_t>{2, 3}));
  // Per table and row: the gradient of its position in `rows` (SGD,
  // learning rate 1), pushed without routing again.
  std::vector<std::vector<float>> grads = {std::vector<float>(2 * kDim),
                                           std::vector<float>(3 * kDim)};
  for (size_t t = 0; t < 2; ++t) {
    for (size_t i = 0; i < grads[t].size(); ++i) {
      grads[t][i] = 0.5f * static_cast<float>(t + 1 + i / kDim);
    }
  }
  ASSERT_TRUE(p->PushAlong(&routes, grads).ok());
  std::vector<std::vector<float>> after;
  ASSERT_TRUE(PullInto(*p, rows, &after).ok());
  for (size_t t = 0; t < 2; ++t) {
    ASSERT_EQ(after[t].size(), values[t].size());
    for (size_t i = 0; i < values[t].size(); ++i) {
      EXPECT_FLOAT_EQ(after[t][i], values[t][i] - grads[t][i])
          << "table " << t << " element " << i;
    }
  }
  // Routes of other rows than the gradients' are refused.
  routes.rows = {1, 3};
  absl::Status s = p->PushAlong(&routes, grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST_F(SparseParametersTest, RowOutsideAFixedTableIsOutOfRange) {
  std::unique_ptr<SparseParameters> p = Make();
  ASSERT_NE(p, nullptr);
  std::vector<std::vector<float>> values;
  absl::Status s = PullInto(*p, {{2, kVocab}, {}}, &values);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_THAT(s.message(), HasSubstr("fixed"));
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(kVocab)));
  s = p->Push({{-1}, {}}, {std::vector<float>(kDim), {}});
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  // Nothing was pushed: row 2 still holds its initial value.
  ASSERT_TRUE(PullInto(*p, {{2}, {}}, &values).ok());
  EXPECT_THAT(values[0], ElementsAreArray(FixedInitialRow(2)));
}

TEST_F(SparseParametersTest, RefusesARowBufferOfTheWrongSize) {
  std::unique_ptr<SparseParameters> p = Make();
  ASSERT_NE(p, nullptr);
  std::vector<float> short_buffer(2 * kDim - 1, 7.0f);
  absl::Status s = p->Pull({{1, 2}, {}},
                           {absl::MakeSpan(short_buffer), absl::Span<float>()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("fixed"));
  EXPECT_THAT(short_buffer, Each(7.0f));
  s = p->Pull({{1}, {}}, {absl::MakeSpan(short_buffer)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST_F(SparseParametersTest, RefusesBadGradientsAndPlacements) {
  std::unique_ptr<SparseParameters> p = Make();
  ASSERT_NE(p, nullptr);
  absl::Status s = p->Push({{1, 2}, {}}, {std::vector<float>(kDim), {}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("fixed"));
  s = p->Push({{1}}, {std::vector<float>(kDim)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  // Shards not in the div layout would route rows to the wrong server.
  placements_.Mutable(0)->mutable_shards(0)->set_rows(4);
  placements_.Mutable(0)->mutable_shards(1)->set_row_offset(4);
  placements_.Mutable(0)->mutable_shards(1)->set_rows(6);
  absl::StatusOr<std::unique_ptr<SparseParameters>> bad =
      SparseParameters::Create(tables_, placements_,
                               {clients_[0].get(), clients_[1].get()});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("div layout"));

  *placements_.Mutable(0) = FixedPlacement();
  placements_.Mutable(1)->set_hash_table(false);
  bad = SparseParameters::Create(tables_, placements_,
                                 {clients_[0].get(), clients_[1].get()});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("grow"));

  placements_.Mutable(1)->set_hash_table(true);
  bad = SparseParameters::Create(tables_, placements_, {clients_[0].get()});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("ps 1"));
}

}  // namespace
}  // namespace tessera
