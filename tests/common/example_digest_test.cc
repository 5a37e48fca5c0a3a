#include "common/example_digest.h"

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/byte_codec.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

StepRequest StepOf(const std::vector<int64_t>& ids) {
  StepRequest step;
  AppendRaw(absl::MakeConstSpan(ids), step.mutable_example_ids());
  return step;
}

TEST(ExampleDigestTest, StepsInAnyOrderAddUpToThePass) {
  const uint64_t pass = DigestOfIndices(0, 6);
  EXPECT_EQ(DigestOfStep(StepOf({4, 0})) + DigestOfStep(StepOf({5, 1, 3})) +
                DigestOfStep(StepOf({2})),
            pass);
}

// The case a count cannot see: six examples trained, one of them twice
// and one never.
TEST(ExampleDigestTest, AnExampleTwiceAndAnotherMissedChangesIt) {
  EXPECT_NE(DigestOfStep(StepOf({0, 1, 2, 3, 4, 4})), DigestOfIndices(0, 6));
  // A step counted twice (its response recorded again) too.
  EXPECT_NE(2 * DigestOfStep(StepOf({0, 1, 2})), DigestOfIndices(0, 6));
}

TEST(ExampleDigestTest, StreamRunsAreTheirShardsPositions) {
  StepRequest step;
  step.mutable_stream()->set_shard(1);
  step.mutable_stream()->set_pass(7);  // any pass: the same examples
  step.mutable_stream()->set_first(10);
  step.mutable_stream()->set_count(5);
  EXPECT_EQ(DigestOfStep(step), DigestOfStreamRun(1, 10, 5));
  EXPECT_EQ(DigestOfStreamRun(1, 0, 10) + DigestOfStreamRun(1, 10, 5),
            DigestOfStreamRun(1, 0, 15));
  // Another shard's positions, or training-set indices, are other examples.
  EXPECT_NE(DigestOfStreamRun(0, 10, 5), DigestOfStreamRun(1, 10, 5));
  EXPECT_NE(DigestOfStreamRun(0, 0, 5), DigestOfIndices(0, 5));
}

TEST(ExampleDigestTest, AStepWithoutExamplesIsZero) {
  EXPECT_EQ(DigestOfStep(StepRequest()), 0u);
  EXPECT_EQ(DigestText(0x1fULL), "000000000000001f");
}

}  // namespace
}  // namespace tessera
