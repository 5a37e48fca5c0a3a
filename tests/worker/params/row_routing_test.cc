// RowRouting: the routing of fixed (div layout) and growing (HashShardOf)
// tables' rows to their shards and servers, and the placements refused.

#include "worker/params/row_routing.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partitioners/hash_routing.h"

// Named, so the file's names do not meet another test's in a unity build
// (TESSERA_UNITY_TESTS).
namespace tessera::row_routing_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kVocab = 10;
constexpr int64_t kDim = 4;

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
  // Shard 0 on ps 1 and shard 1 on ps 0: the shard is not the server.
  VariablePlacement p;
  p.set_name("grow");
  p.mutable_shape()->add_dims(0);
  p.mutable_shape()->add_dims(kDim);
  p.set_hash_table(true);
  for (int k = 0; k < 2; ++k) {
    ShardPlacement* s = p.add_shards();
    s->set_name(absl::StrCat("grow/part_", k));
    s->set_ps_task(1 - k);
  }
  return p;
}

class RowRoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tables_ = {VariableDef{"fixed", {kVocab, kDim}, {}, true},
               VariableDef{"grow", {0, kDim}, {}, true}};
    *placements_.Add() = FixedPlacement();
    *placements_.Add() = HashPlacement();
  }

  absl::StatusOr<RowRouting> Make(int servers = 2) {
    return RowRouting::Create(tables_, placements_, servers);
  }

  std::vector<VariableDef> tables_;
  google::protobuf::RepeatedPtrField<VariablePlacement> placements_;
};

TEST_F(RowRoutingTest, RoutesFixedRowsByTheDivLayout) {
  absl::StatusOr<RowRouting> routing = Make();
  ASSERT_TRUE(routing.ok()) << routing.status();
  RowRoutes routes;
  ASSERT_TRUE(routing->Route({{1, 7, 9, 4}, {}}, &routes).ok());
  ASSERT_EQ(routes.tables.size(), 2u);
  EXPECT_EQ(routes.tables[0].rows, 4u);
  EXPECT_EQ(routes.tables[0].name, "fixed");
  EXPECT_EQ(routes.tables[0].dim, kDim);
  EXPECT_EQ(routes.tables[1].rows, 0u);
  // Every shard of every table has its entry, with rows or without.
  ASSERT_EQ(routes.per_ps.size(), 2u);
  ASSERT_EQ(routes.per_ps[0].size(), 2u);
  ASSERT_EQ(routes.per_ps[1].size(), 2u);
  const ShardRows& low = routes.per_ps[0][0];
  EXPECT_EQ(low.table, 0);
  EXPECT_EQ(low.shard, 0);
  EXPECT_THAT(low.ids, ElementsAre(1, 4));
  EXPECT_THAT(low.positions, ElementsAre(0, 3));
  const ShardRows& high = routes.per_ps[1][0];
  EXPECT_EQ(high.shard, 1);
  EXPECT_THAT(high.ids, ElementsAre(7, 9));
  EXPECT_THAT(high.positions, ElementsAre(1, 2));
  // Each entry names what its server's call sends.
  EXPECT_EQ(high.name, "fixed/part_1");
  EXPECT_EQ(high.dim, kDim);
  EXPECT_EQ(routing->table(0).dim, kDim);
  EXPECT_EQ(routing->table(0).shard_names[1], "fixed/part_1");
}

TEST_F(RowRoutingTest, RoutesHashRowsWithHashShardOfToTheirShardsServer) {
  absl::StatusOr<RowRouting> routing = Make();
  ASSERT_TRUE(routing.ok()) << routing.status();
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 200; ++i) rows.push_back(i * 7919 - 500);
  RowRoutes routes;
  ASSERT_TRUE(routing->Route({{}, rows}, &routes).ok());
  int64_t routed = 0;
  for (int ps = 0; ps < 2; ++ps) {
    for (const ShardRows& r : routes.per_ps[ps]) {
      if (r.table != 1) continue;
      // Shard s is on ps 1 - s.
      EXPECT_EQ(ps, 1 - r.shard);
      for (size_t i = 0; i < r.ids.size(); ++i) {
        EXPECT_EQ(HashShardOf(r.ids[i], 2), r.shard) << "id " << r.ids[i];
        EXPECT_EQ(rows[r.positions[i]], r.ids[i]);
        ++routed;
      }
      EXPECT_FALSE(r.ids.empty()) << "shard " << r.shard;
    }
  }
  EXPECT_EQ(routed, 200);
}

TEST_F(RowRoutingTest, RowOutsideAFixedTableIsOutOfRange) {
  absl::StatusOr<RowRouting> routing = Make();
  ASSERT_TRUE(routing.ok()) << routing.status();
  RowRoutes routes;
  absl::Status s = routing->Route({{2, kVocab}, {}}, &routes);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_THAT(s.message(), HasSubstr("fixed"));
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(kVocab)));
  s = routing->Route({{-1}, {}}, &routes);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  s = routing->Route({{1}}, &routes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST_F(RowRoutingTest, RefusesPlacementsThatDoNotFit) {
  // Shards not in the div layout would route rows to the wrong server.
  placements_.Mutable(0)->mutable_shards(0)->set_rows(4);
  placements_.Mutable(0)->mutable_shards(1)->set_row_offset(4);
  placements_.Mutable(0)->mutable_shards(1)->set_rows(6);
  absl::StatusOr<RowRouting> bad = Make();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("div layout"));

  *placements_.Mutable(0) = FixedPlacement();
  placements_.Mutable(1)->set_hash_table(false);
  bad = Make();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("grow"));

  placements_.Mutable(1)->set_hash_table(true);
  bad = Make(/*servers=*/1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("ps 1"));

  placements_.Mutable(1)->mutable_shape()->set_dims(1, kDim + 1);
  bad = Make();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("wrong shape"));

  placements_.RemoveLast();
  bad = Make();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("no placement for table grow"));
}

}  // namespace
}  // namespace tessera::row_routing_test
