#include "worker/params/sharded_parameters.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct Shard {
  int64_t offset;
  int64_t rows;
};

// A placement of variable "w" (shape `shape`) with `shards`, all on ps 0.
google::protobuf::RepeatedPtrField<VariablePlacement> Placement(
    const std::vector<int64_t>& shape, const std::vector<Shard>& shards) {
  google::protobuf::RepeatedPtrField<VariablePlacement> placements;
  VariablePlacement* p = placements.Add();
  p->set_name("w");
  for (int64_t d : shape) p->mutable_shape()->add_dims(d);
  for (size_t i = 0; i < shards.size(); ++i) {
    ShardPlacement* s = p->add_shards();
    s->set_name(absl::StrCat("w/part_", i));
    s->set_row_offset(shards[i].offset);
    s->set_rows(shards[i].rows);
    s->set_ps_task(0);
  }
  return placements;
}

// Create never calls a client, so a null one stands for parameter server 0.
absl::Status CreateStatus(const std::vector<int64_t>& shape,
                          const std::vector<Shard>& shards) {
  VariableDef w;
  w.name = "w";
  w.shape = shape;
  return ShardedParameters::Create({w}, Placement(shape, shards), {nullptr})
      .status();
}

TEST(ShardedParametersTest, ShardsThatTileTheRowsAreAccepted) {
  EXPECT_TRUE(CreateStatus({10, 3}, {{0, 4}, {4, 0}, {4, 6}}).ok());
  EXPECT_TRUE(CreateStatus({}, {{0, 1}}).ok());  // a scalar
}

// Row counts whose sum overflows int64 would once wrap back to the
// variable's row count and leave views outside the buffer.
// Host memory that counts what is taken and given back.
class CountingAllocator final : public HostAllocator {
 public:
  void* AllocateHost(int64_t bytes) override {
    ++live;
    bytes_taken += bytes;
    return AllocatePlainHost(bytes);
  }
  void FreeHost(void* ptr) override {
    --live;
    FreePlainHost(ptr);
  }
  int live = 0;
  int64_t bytes_taken = 0;
};

// The buffers pulled values land in (and gradients leave from) come from
// the backend's host allocator (pinned memory on a GPU), zeroed, and go
// back to it with the object.
TEST(ShardedParametersTest, BuffersComeFromTheHostAllocator) {
  CountingAllocator host;
  VariableDef w;
  w.name = "w";
  w.shape = {10, 3};
  {
    absl::StatusOr<std::unique_ptr<ShardedParameters>> p =
        ShardedParameters::Create({w}, Placement({10, 3}, {{0, 4}, {4, 6}}),
                                  {nullptr}, &host);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(host.live, 2);  // values and gradients
    EXPECT_EQ(host.bytes_taken, 2 * 30 * 4);
    ASSERT_EQ((*p)->values().size(), 1u);
    EXPECT_EQ((*p)->values()[0].size(), 30u);
    EXPECT_EQ((*p)->values()[0][29], 0.0f);
    EXPECT_EQ((*p)->gradients()[0].size(), 30u);
  }
  EXPECT_EQ(host.live, 0);
}

// Borrowed buffers (the graph's own, where the device is the host) are
// used as they are: nothing is allocated, and the views are those spans.
// Wrong sizes or counts are refused.
TEST(ShardedParametersTest, BorrowedBuffersAreUsedInPlace) {
  CountingAllocator host;
  VariableDef w;
  w.name = "w";
  w.shape = {10, 3};
  std::vector<float> values(30), grads(30);
  ShardedParameters::Borrowed borrowed{{absl::MakeSpan(values)},
                                       {absl::MakeSpan(grads)}};
  absl::StatusOr<std::unique_ptr<ShardedParameters>> p =
      ShardedParameters::Create({w}, Placement({10, 3}, {{0, 4}, {4, 6}}),
                                {nullptr}, &host, &borrowed);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(host.live, 0);
  EXPECT_EQ((*p)->values()[0].data(), values.data());
  EXPECT_EQ((*p)->values()[0].size(), 30u);
  EXPECT_EQ((*p)->gradients()[0].data(), grads.data());

  ShardedParameters::Borrowed short_one{{absl::MakeSpan(values).subspan(1)},
                                        {absl::MakeSpan(grads)}};
  absl::Status wrong =
      ShardedParameters::Create({w}, Placement({10, 3}, {{0, 10}}), {nullptr},
                                &host, &short_one)
          .status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()),
              AllOf(HasSubstr("w"), HasSubstr("30"), HasSubstr("29")));
  ShardedParameters::Borrowed none;
  EXPECT_EQ(ShardedParameters::Create({w}, Placement({10, 3}, {{0, 10}}),
                                      {nullptr}, &host, &none)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardedParametersTest, OverflowingShardsAreRejected) {
  const std::vector<std::vector<Shard>> bad = {
      {{0, kMax}, {kMax, kMax}, {-2, 12}},
      {{0, 4}, {4, kMax}},
      {{0, 11}, {11, -1}},
      {{0, 5}, {5, 6}},
      {{0, 10}, {10, 1}},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    absl::Status s = CreateStatus({10}, bad[i]);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(),
                AllOf(HasSubstr("placement of w"), HasSubstr("shard w/part_")));
  }
  absl::Status s = CreateStatus({10}, bad[0]);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("shard w/part_0"),
                                 HasSubstr(absl::StrCat(kMax, " rows from 0")),
                                 HasSubstr("10 rows")));
}

TEST(ShardedParametersTest, GapsAndShortCoverAreRejected) {
  EXPECT_THAT(CreateStatus({10}, {{0, 4}, {5, 5}}).message(),
              HasSubstr("does not follow row 4"));
  EXPECT_THAT(CreateStatus({10}, {{0, 4}}).message(),
              HasSubstr("covers 4 rows of 10"));
  EXPECT_THAT(CreateStatus({10}, {{-2, 12}}).message(),
              HasSubstr("does not follow row 0"));
}

}  // namespace
}  // namespace tessera
