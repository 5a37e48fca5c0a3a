#include "common/cluster/hostlist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/escaping.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Expand(const std::string& hostlist) {
  absl::StatusOr<std::vector<std::string>> hosts = ExpandHostlist(hostlist);
  EXPECT_TRUE(hosts.ok()) << hosts.status();
  return hosts.ok() ? *hosts : std::vector<std::string>{};
}

std::vector<int> Counts(const std::string& text) {
  absl::StatusOr<std::vector<int>> counts = ExpandTasksPerNode(text);
  EXPECT_TRUE(counts.ok()) << counts.status();
  return counts.ok() ? *counts : std::vector<int>{};
}

TEST(ExpandHostlistTest, NamesWithoutBrackets) {
  EXPECT_THAT(Expand("vm"), ElementsAre("vm"));
  EXPECT_THAT(Expand("login1,gpu-a.example.org,n7"),
              ElementsAre("login1", "gpu-a.example.org", "n7"));
}

TEST(ExpandHostlistTest, RangesAndSingleValues) {
  EXPECT_THAT(Expand("node[01-02]"), ElementsAre("node01", "node02"));
  EXPECT_THAT(Expand("n[1,3-4,7]"), ElementsAre("n1", "n3", "n4", "n7"));
  EXPECT_THAT(Expand("a[1-2],b,c[5]"), ElementsAre("a1", "a2", "b", "c5"));
  EXPECT_THAT(Expand("[1-2]"), ElementsAre("1", "2"));
}

// TF up to about 2.5 printed str(int) and lost the zeros (#49956).
TEST(ExpandHostlistTest, KeepsZeroPaddingOfTheRangeStart) {
  EXPECT_THAT(Expand("node[009-011]"),
              ElementsAre("node009", "node010", "node011"));
  EXPECT_THAT(Expand("n[08-10]"), ElementsAre("n08", "n09", "n10"));
  // The width is the start's, per range (scontrol show hostnames agrees).
  EXPECT_THAT(Expand("n[9-011]"), ElementsAre("n9", "n10", "n11"));
  EXPECT_THAT(Expand("n[01-3,7]"), ElementsAre("n01", "n02", "n03", "n7"));
}

// TF sorted hosts as strings, putting n10 before n9.
TEST(ExpandHostlistTest, KeepsSlurmsOrderWithoutSorting) {
  EXPECT_THAT(Expand("n[9-10]"), ElementsAre("n9", "n10"));
  EXPECT_THAT(Expand("n[3,1]"), ElementsAre("n3", "n1"));
  EXPECT_THAT(Expand("n10,n9"), ElementsAre("n10", "n9"));
  EXPECT_THAT(Expand("n[1-2,2]"), ElementsAre("n1", "n2", "n2"));
}

// TF accepted one trailing bracket group only.
TEST(ExpandHostlistTest, TwoGroupsLeftmostOutermost) {
  EXPECT_THAT(Expand("rack[1-2]-node[01-04]"),
              ElementsAre("rack1-node01", "rack1-node02", "rack1-node03",
                          "rack1-node04", "rack2-node01", "rack2-node02",
                          "rack2-node03", "rack2-node04"));
  EXPECT_THAT(Expand("n[1-2].ib[0-1]"),
              ElementsAre("n1.ib0", "n1.ib1", "n2.ib0", "n2.ib1"));
  EXPECT_THAT(Expand("n[1-2]-[3-4]"),
              ElementsAre("n1-3", "n1-4", "n2-3", "n2-4"));
  EXPECT_THAT(Expand("n[1,3-4]x[1-2]"),
              ElementsAre("n1x1", "n1x2", "n3x1", "n3x2", "n4x1", "n4x2"));
  EXPECT_THAT(Expand("a[1-2],b[3-4]c[1-2]"),
              ElementsAre("a1", "a2", "b3c1", "b3c2", "b4c1", "b4c2"));
}

// The orders `scontrol show hostnames` (Slurm 22.05.8) prints for three and
// four groups: Slurm's recursion puts the next-to-last group outermost.
TEST(ExpandHostlistTest, ThreeAndFourGroupsInSlurmsOrder) {
  EXPECT_THAT(Expand("a[1-2]b[3-4]c[5-6]"),
              ElementsAre("a1b3c5", "a1b3c6", "a2b3c5", "a2b3c6", "a1b4c5",
                          "a1b4c6", "a2b4c5", "a2b4c6"));
  EXPECT_THAT(Expand("a[1-2]b[3-4]c[5-6]d[7-8]"),
              ElementsAre("a1b3c5d7", "a1b3c5d8", "a2b3c5d7", "a2b3c5d8",
                          "a1b4c5d7", "a1b4c5d8", "a2b4c5d7", "a2b4c5d8",
                          "a1b3c6d7", "a1b3c6d8", "a2b3c6d7", "a2b3c6d8",
                          "a1b4c6d7", "a1b4c6d8", "a2b4c6d7", "a2b4c6d8"));
  EXPECT_THAT(Expand("x[1-2]y[3]"), ElementsAre("x1y3", "x2y3"));
}

TEST(ExpandHostlistTest, LargestRangeAndLargestNumber) {
  std::vector<std::string> hosts = Expand("n[0-65535]");
  ASSERT_EQ(hosts.size(), 65536u);
  EXPECT_EQ(hosts.front(), "n0");
  EXPECT_EQ(hosts.back(), "n65535");
  EXPECT_THAT(Expand("n[18446744073709551614-18446744073709551615]"),
              ElementsAre("n18446744073709551614", "n18446744073709551615"));
}

// Expects InvalidArgument whose message quotes `hostlist` (C-escaped) and
// contains `detail`.
void ExpectBadHostlist(const std::string& hostlist, const std::string& detail) {
  absl::StatusOr<std::vector<std::string>> hosts = ExpandHostlist(hostlist);
  ASSERT_FALSE(hosts.ok()) << "\"" << hostlist << "\" expanded";
  EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(hosts.status().message(),
              HasSubstr("host list \"" + absl::CHexEscape(hostlist) + "\""));
  EXPECT_THAT(hosts.status().message(), HasSubstr(detail)) << hostlist;
}

TEST(ExpandHostlistTest, ErrorNamesTextAndPosition) {
  absl::StatusOr<std::vector<std::string>> hosts = ExpandHostlist("node[01-");
  EXPECT_EQ(hosts.status().message(),
            "host list \"node[01-\": '[' is never closed at position 4");
}

TEST(ExpandHostlistTest, RejectsMalformedLists) {
  ExpectBadHostlist("", "empty list");
  // Brackets.
  ExpectBadHostlist("n[1-2", "'[' is never closed at position 1");
  ExpectBadHostlist("n1-2]", "']' without a matching '[' at position 4");
  ExpectBadHostlist("n[1]]", "']' without a matching '[' at position 4");
  ExpectBadHostlist("n[[1]]",
                    "'[' at position 2 is inside the bracket "
                    "group opened at position 1");
  ExpectBadHostlist("a[1-2]b", "\"b\" follows the last bracket group");
  ExpectBadHostlist("n[1-2]x[3]y", "\"y\" follows the last bracket group");
  // Groups and ranges.
  ExpectBadHostlist("n[]", "empty bracket group \"[]\" at position 1");
  ExpectBadHostlist("n[1,]", "empty range in a bracket group at position 4");
  ExpectBadHostlist("n[,1]", "empty range in a bracket group at position 2");
  ExpectBadHostlist("n[5-3]", "reversed range \"5-3\"");
  ExpectBadHostlist("n[010-8]", "reversed range \"010-8\"");
  ExpectBadHostlist("n[a]", "\"a\" is neither a number nor a range");
  ExpectBadHostlist("n[1-]", "\"1-\" is neither a number nor a range");
  ExpectBadHostlist("n[-3]", "\"-3\" is neither a number nor a range");
  ExpectBadHostlist("n[1-2-3]", "\"1-2-3\" is neither");
  ExpectBadHostlist("n[+1]", "\"+1\" is neither");
  ExpectBadHostlist("n[1x2]", "\"1x2\" is neither");
  ExpectBadHostlist("n[1-2,7-5]",
                    "reversed range \"7-5\" (its start is "
                    "after its end) at position 6");
  // Overflow and size.
  ExpectBadHostlist("n[18446744073709551616]", "does not fit in 64 bits");
  ExpectBadHostlist("n[1-99999999999999999999]", "does not fit in 64 bits");
  ExpectBadHostlist("n[0-65536]", "more than 65536 values");
  ExpectBadHostlist("a[0-1023]b[0-1023]c[0-1]", "more than 1048576 names");
  // Names.
  ExpectBadHostlist("a,,b",
                    "empty host name (two commas in a row, or a "
                    "comma at an end) at position 2");
  ExpectBadHostlist("a,", "empty host name");
  ExpectBadHostlist(",a", "empty host name");
  ExpectBadHostlist("a b", "whitespace or a control character at position 1");
  ExpectBadHostlist("n[ 1]", "whitespace");
  ExpectBadHostlist("n1\n", "whitespace or a control character at position 2");
  ExpectBadHostlist(std::string("n\0", 2), "control character at position 1");
}

TEST(ExpandHostlistTest, CapsTheTotalAcrossNames) {
  std::string many = "a[0-65535]";
  for (int i = 1; i < 17; ++i) many += ",b" + std::to_string(i) + "[0-65535]";
  ExpectBadHostlist(many, "more than 1048576 names");
}

TEST(ExpandTasksPerNodeTest, CountsAndRepeats) {
  EXPECT_THAT(Counts("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(Counts("4"), ElementsAre(4));
  EXPECT_THAT(Counts("3,1"), ElementsAre(3, 1));
  EXPECT_THAT(Counts("1(x2)"), ElementsAre(1, 1));
  EXPECT_THAT(Counts("3,1(x2),2"), ElementsAre(3, 1, 1, 2));
  EXPECT_THAT(Counts("2147483647"), ElementsAre(2147483647));
}

void ExpectBadCounts(const std::string& text, const std::string& detail) {
  absl::StatusOr<std::vector<int>> counts = ExpandTasksPerNode(text);
  ASSERT_FALSE(counts.ok()) << "\"" << text << "\" expanded";
  EXPECT_EQ(counts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(counts.status().message(),
              HasSubstr("tasks per node \"" + text + "\""));
  EXPECT_THAT(counts.status().message(), HasSubstr(detail)) << text;
}

TEST(ExpandTasksPerNodeTest, RejectsMalformedCounts) {
  ExpectBadCounts("", "is empty");
  ExpectBadCounts("2(x0)", "repeat (x0) in \"2(x0)\"");
  ExpectBadCounts("1,2(x0)",
                  "repeat (x0) in \"2(x0)\"; a repeat is at "
                  "least 1 at position 2");
  ExpectBadCounts("0", "count 0 in \"0\"");
  ExpectBadCounts("3,0(x2)", "count 0 in \"0(x2)\"");
  ExpectBadCounts("2(3)",
                  "malformed repeat \"(3)\"; expected (xN) at "
                  "position 1");
  ExpectBadCounts("2(x3", "malformed repeat \"(x3\"");
  ExpectBadCounts("2(x)", "malformed repeat");
  ExpectBadCounts("2(x3)4", "malformed repeat");
  ExpectBadCounts("2x3", "\"2x3\" is neither a count N nor a repeated count");
  ExpectBadCounts("a", "\"a\" is neither");
  ExpectBadCounts("-1", "\"-1\" is neither");
  ExpectBadCounts("(x2)", "\"(x2)\" is neither");
  ExpectBadCounts("2(xa)", "\"2(xa)\" is neither");
  ExpectBadCounts(" 2", "\" 2\" is neither");
  ExpectBadCounts("2,,1",
                  "empty part (two commas in a row, or a comma at an "
                  "end) at position 2");
  ExpectBadCounts("2,", "empty part");
  ExpectBadCounts("2147483648", "does not fit in an int");
  ExpectBadCounts("2(x99999999999)", "does not fit in an int");
  ExpectBadCounts("1(x1048576),1", "expands to more than 1048576 counts");
}

// The padding width of a range start was never bounded: "n[" + 2000 zeros +
// "-65535]" built 65536 names of 2000 digits before the name length was
// checked.
TEST(ExpandHostlistTest, RejectsPaddingWiderThanAHostName) {
  const std::string zeros(2000, '0');
  absl::StatusOr<std::vector<std::string>> hosts =
      ExpandHostlist("n[" + zeros + "-65535]");
  EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(hosts.status().message()),
              HasSubstr("range \"" + zeros +
                        "-65535\" pads its values to 2000 digits; a host name "
                        "has at most 255 characters at position 2"));
  // 255 digits is a name of 256 characters with "n": refused too, by the
  // name length, before any value is built.
  hosts = ExpandHostlist("n[" + std::string(255, '0') + "-65535]");
  EXPECT_THAT(std::string(hosts.status().message()),
              HasSubstr("a host name of up to 256 characters"));
  EXPECT_THAT(Expand("[" + std::string(255, '0') + "-1]"),
              ElementsAre(std::string(255, '0'), std::string(254, '0') + "1"));
}

}  // namespace
}  // namespace tessera
