#include "common/io/output_folder.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(OutputFolderTest, CreatesThePrefixsFolderAndItsParents) {
  const std::string root =
      absl::StrCat(::testing::TempDir(), "/output_folder_", getpid());
  fs::remove_all(root);
  ASSERT_TRUE(CreateParentFolder(root + "/fm/data/train").ok());
  EXPECT_TRUE(fs::is_directory(root + "/fm/data"));
  EXPECT_FALSE(fs::exists(root + "/fm/data/train"));
  // Again, and a prefix in the working directory: nothing to make.
  EXPECT_TRUE(CreateParentFolder(root + "/fm/data/train").ok());
  EXPECT_TRUE(CreateParentFolder("train").ok());
  fs::remove_all(root);
}

TEST(OutputFolderTest, AFolderThatCannotBeMadeIsNamed) {
  const absl::Status s = CreateOutputFolder("/dev/null/ctr");
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(absl::IsUnknown(s) || absl::IsInternal(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("/dev/null/ctr"));
  EXPECT_TRUE(absl::IsInvalidArgument(CreateOutputFolder("")));
}

}  // namespace
}  // namespace tessera
