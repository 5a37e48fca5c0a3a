// Inputs tests/fuzz found to misbehave, kept as regressions.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/hostlist.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

std::string Group(int ranges) {
  std::string group = "[";
  for (int i = 0; i < ranges; ++i) {
    absl::StrAppend(&group, i == 0 ? "" : ",", "0-65535");
  }
  return group + "]";
}

// Several groups of 2^20 values each used to be expanded in full before
// their product was checked: hundreds of MB to gigabytes for a short list.
TEST(HostlistFuzzRegression, LargeGroupsAreRejectedBeforeTheNextExpands) {
  const std::string g = Group(16);  // 16 * 65536 = 2^20 values
  absl::StatusOr<std::vector<std::string>> hosts =
      ExpandHostlist(absl::StrCat("n", g, "x", g, "y", g, "z", g));
  EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(hosts.status().message()),
              HasSubstr("expands to more than 1048576 names"));
  // One such group alone is still fine.
  hosts = ExpandHostlist(absl::StrCat("n", g));
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(hosts->size(), 1u << 20);
}

// A long literal times 2^20 names asked for gigabytes (an out-of-memory in
// the fuzzer); host names are now capped at DNS's 255 characters.
TEST(HostlistFuzzRegression, LongHostNamesAreRejected) {
  absl::StatusOr<std::vector<std::string>> hosts =
      ExpandHostlist(absl::StrCat(std::string(8000, 'A'), "[0-1023]b[0-1023]"));
  EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(hosts.status().message()),
              HasSubstr("at most 255 are allowed"));

  EXPECT_TRUE(ExpandHostlist(std::string(255, 'h')).ok());
  EXPECT_FALSE(ExpandHostlist(std::string(256, 'h')).ok());
  // The widest value counts: 253 + "99" is 255 characters, 254 + "99" 256.
  EXPECT_TRUE(ExpandHostlist(std::string(253, 'h') + "[0-99]").ok());
  hosts = ExpandHostlist("a," + std::string(254, 'h') + "[0-99]");
  EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(hosts.status().message()),
              HasSubstr("a host name of up to 256 characters; at most 255 are "
                        "allowed at position 2"));
}

}  // namespace
}  // namespace tessera
