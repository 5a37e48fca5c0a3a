#include "worker/collective/nccl_allreduce.h"

#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace {

// Without a GPU only the argument checks and the CPU-only twin can be
// tested; the NCCL path itself needs GPUs and runs in mirrored training.
TEST(NcclAllReduceTest, BadArgumentsOrNoNcclAreErrorsNotCrashes) {
  const std::string id(128, '\0');
  if (!NcclBuilt()) {
    EXPECT_TRUE(absl::IsUnavailable(NcclAllReduce::NewUniqueId().status()));
    EXPECT_TRUE(
        absl::IsUnavailable(NcclAllReduce::Create(0, 2, id, 0, 1).status()));
    return;
  }
  EXPECT_TRUE(
      absl::IsInvalidArgument(NcclAllReduce::Create(2, 2, id, 0, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      NcclAllReduce::Create(0, 2, "too short", 0, 1).status()));
}

}  // namespace
}  // namespace tessera
