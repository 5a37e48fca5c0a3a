#include "common/command_line.h"

#include <string>
#include <vector>

#include "gflags/gflags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

DEFINE_int32(command_line_test_count, 1, "A number for the test.");
DEFINE_uint64(command_line_test_seed, 1, "An unsigned number for the test.");
DEFINE_bool(command_line_test_switch, false, "A switch for the test.");

namespace tessera {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(std::vector<std::string> args) {
  args.insert(args.begin(), "program");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  gflags::FlagSaver saver;
  return FirstFlagError(static_cast<int>(argv.size()), argv.data());
}

TEST(CommandLineTest, GoodFlagsHaveNoError) {
  EXPECT_EQ(ErrorOf({"--command_line_test_count=3", "-command_line_test_seed",
                     "7", "--command_line_test_switch",
                     "--nocommand_line_test_switch", "positional"}),
            "");
  // Everything after "--" belongs to someone else.
  EXPECT_EQ(ErrorOf({"--", "--no_such_flag"}), "");
}

TEST(CommandLineTest, UnknownFlagIsNamed) {
  EXPECT_THAT(ErrorOf({"--command_line_test_cuont=3"}),
              HasSubstr("unknown command line flag 'command_line_test_cuont'"));
  EXPECT_THAT(ErrorOf({"--nocommand_line_test_count"}),
              HasSubstr("unknown command line flag"));
}

TEST(CommandLineTest, BadValuesAreNamed) {
  EXPECT_THAT(ErrorOf({"--command_line_test_seed=-1"}),
              HasSubstr("illegal value '-1' specified for uint64 flag "
                        "'command_line_test_seed'"));
  EXPECT_THAT(ErrorOf({"--command_line_test_count", "many"}),
              HasSubstr("illegal value 'many'"));
  EXPECT_THAT(ErrorOf({"--command_line_test_count"}),
              HasSubstr("missing its argument"));
}

}  // namespace
}  // namespace tessera
