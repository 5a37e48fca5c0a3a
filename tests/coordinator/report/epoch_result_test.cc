#include "coordinator/report/epoch_result.h"

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/byte_codec.h"
#include "common/example_digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

uint64_t DigestOf(const std::vector<int64_t>& ids) {
  StepRequest step;
  AppendRaw(absl::MakeConstSpan(ids), step.mutable_example_ids());
  return DigestOfStep(step);
}

// An epoch of 4 examples in 2 steps of 2, recorded as the step runner
// does: each completed step's digest added to the epoch's.
TEST(CheckExampleDigestTest, OnePassPasses) {
  EpochResult result;
  result.epoch = 1;
  for (const auto& step : {std::vector<int64_t>{2, 3}, {0, 1}}) {
    result.examples += 2;
    result.example_digest += DigestOf(step);
  }
  EXPECT_TRUE(CheckExampleDigest(result, DigestOfIndices(0, 4)).ok());
}

// A resume that runs step {0, 1} again and loses step {2, 3}: 4 examples,
// as one pass has, so the count check passed it; the digest does not.
TEST(CheckExampleDigestTest, AStepRunTwiceFailsTheCheckThatTheCountPasses) {
  EpochResult result;
  result.epoch = 3;
  for (int run = 0; run < 2; ++run) {
    result.examples += 2;
    result.example_digest += DigestOf({0, 1});
  }
  EXPECT_EQ(result.examples, 4);
  absl::Status s = CheckExampleDigest(result, DigestOfIndices(0, 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("epoch 3 trained 4 examples, but not "
                                     "each example of the training set once"));
}

TEST(CheckExampleDigestTest, PartsOfAnEpochAddUp) {
  EpochResult before, after;
  before.example_digest = DigestOf({0, 1});
  after.example_digest = DigestOf({2, 3});
  AddEpochPart(after, &before);
  EXPECT_TRUE(CheckExampleDigest(before, DigestOfIndices(0, 4)).ok());
}

// An epoch resumed from a checkpoint of an older Tessera, which kept no
// digest of the part before it: its count is checked, its digest cannot be.
TEST(CheckExampleDigestTest, APartWithoutADigestLeavesTheEpochUnchecked) {
  EpochResult before, after;
  before.digest_known = false;
  after.example_digest = DigestOf({2, 3});
  AddEpochPart(after, &before);
  EXPECT_TRUE(CheckExampleDigest(before, DigestOfIndices(0, 4)).ok());
}

}  // namespace
}  // namespace tessera
