#include "worker/collective/nccl_allreduce.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace {

// Whether a mapping of this process names `library`.
bool Mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(library) != std::string::npos) return true;
  }
  return false;
}

// NCCL is the node's, loaded when a group negotiates it: a binary that
// listed libnccl.so.2 as NEEDED would not start where it is missing. CTest
// runs each case in a process of its own, and nothing before this loads
// NCCL.
TEST(NcclAllReduceTest, NcclIsMappedOnlyOnceLoaded) {
  EXPECT_FALSE(Mapped("libnccl.so"))
      << "NCCL is mapped at start-up: some binary links it";
  const absl::Status loaded = NcclLoadable();
  if (!NcclBuilt()) {
    EXPECT_TRUE(absl::IsUnavailable(loaded)) << loaded;
    return;
  }
  // Where this machine has NCCL it is now mapped; where not, why is said.
  EXPECT_EQ(loaded.ok(), Mapped("libnccl.so")) << loaded;
  if (!loaded.ok()) {
    EXPECT_NE(loaded.message().find("libnccl.so.2"), std::string::npos)
        << loaded;
  }
}

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
