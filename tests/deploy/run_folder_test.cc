#include "deploy/local/run_folder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class RunFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("run_folder_test." + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
};

TEST_F(RunFolderTest, ARequestedFolderIsCreatedWithItsParents) {
  const fs::path wanted = root_ / "a" / "b" / "run";
  absl::StatusOr<std::string> dir = MakeRunDir(wanted.string());
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, wanted.string());
  EXPECT_TRUE(fs::is_directory(wanted));
}

TEST_F(RunFolderTest, AFolderUnderAFileIsTheUsersMistake) {
  const fs::path file = root_ / "file";
  std::ofstream(file) << "x";
  absl::StatusOr<std::string> dir = MakeRunDir((file / "run").string());
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(), HasSubstr("cannot create run folder"));
  EXPECT_THAT(dir.status().message(), HasSubstr((file / "run").string()));
}

TEST_F(RunFolderTest, CheckBinariesNamesEachMissingOrNotExecutableFile) {
  const fs::path runnable = root_ / "runnable";
  const fs::path plain = root_ / "plain";
  std::ofstream(runnable) << "#!/bin/sh\n";
  std::ofstream(plain) << "x";
  fs::permissions(runnable, fs::perms::owner_all);
  const fs::path missing = root_ / "missing";
  EXPECT_TRUE(CheckBinaries({runnable.string()}).ok());
  const absl::Status status =
      CheckBinaries({runnable.string(), plain.string(), missing.string()});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(),
              HasSubstr(plain.string() + " (not executable)"));
  EXPECT_THAT(status.message(), HasSubstr(missing.string() + " (missing)"));
  EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("runnable (")));
}

TEST_F(RunFolderTest, WriteWithModeSetsTheExactMode) {
  const std::string path = (root_ / "token").string();
  std::ofstream(path) << "old";
  fs::permissions(path, fs::perms::all);
  ASSERT_TRUE(WriteWithMode(path, "secret\n", 0600).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "secret");
}

}  // namespace
}  // namespace tessera
