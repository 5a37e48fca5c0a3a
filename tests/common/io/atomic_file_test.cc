#include "common/io/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/atomic_file_test_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = dir_ + "/model.onnx";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Read() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_, path_;
};

TEST_F(AtomicFileTest, ReplacesTheFileWithTheExactMode) {
  ASSERT_TRUE(WriteFileAtomically(path_, "old").ok());
  AtomicWriteOptions options;
  options.mode = 0600;
  ASSERT_TRUE(
      WriteFileAtomically(path_, std::string(1 << 20, 'x'), options).ok());
  EXPECT_EQ(Read(), std::string(1 << 20, 'x'));
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
}

// Issue #31, item 4: each step made to fail in turn leaves the old file
// intact, no temporary file behind, and an error naming the step and the
// file. Only a failed folder fsync, after the rename, leaves the new one.
TEST_F(AtomicFileTest, EachStepFailingLeavesTheOldFileAndNamesTheStep) {
  const struct {
    AtomicWriteStep step;
    const char* named;
  } cases[] = {
      {AtomicWriteStep::kCreate, "cannot create"},
      {AtomicWriteStep::kWrite, "cannot write"},
      {AtomicWriteStep::kSyncFile, "cannot fsync"},
      {AtomicWriteStep::kClose, "cannot close"},
      {AtomicWriteStep::kRename, "cannot rename"},
  };
  for (const auto& c : cases) {
    ASSERT_TRUE(WriteFileAtomically(path_, "old contents").ok());
    AtomicWriteOptions options;
    options.TEST_fail_at = c.step;
    absl::Status s = WriteFileAtomically(path_, "new contents", options);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.named;
    EXPECT_THAT(s.message(), HasSubstr(c.named));
    EXPECT_THAT(s.message(), HasSubstr("model.onnx"));
    EXPECT_THAT(s.message(), HasSubstr("Input/output error"));
    EXPECT_EQ(Read(), "old contents") << c.named;
    EXPECT_FALSE(fs::exists(path_ + ".tmp")) << c.named;
    // What the closing note shows: each step's error, and the file.
    std::printf("[atomic] %s\n[atomic]   the file holds \"%s\"%s\n",
                s.ToString().c_str(), Read().c_str(),
                fs::exists(path_ + ".tmp") ? ", a .tmp is left" : "");
  }
  AtomicWriteOptions options;
  options.TEST_fail_at = AtomicWriteStep::kSyncFolder;
  absl::Status s = WriteFileAtomically(path_, "new contents", options);
  EXPECT_THAT(s.message(), HasSubstr("cannot fsync folder"));
  EXPECT_THAT(s.message(), HasSubstr("may not survive a power cut"));
  EXPECT_EQ(Read(), "new contents");
  std::printf("[atomic] %s\n[atomic]   the file holds \"%s\"\n",
              s.ToString().c_str(), Read().c_str());
}

TEST_F(AtomicFileTest, AMissingFolderIsNamed) {
  absl::Status s = WriteFileAtomically(dir_ + "/no/such/model.onnx", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(dir_ + "/no/such/model.onnx.tmp"));
}

// A file another library wrote (libzip's .keras archive) is put in place
// the same way; one that is not there leaves the target as it was.
TEST_F(AtomicFileTest, CommitPutsAWrittenFileInPlace) {
  ASSERT_TRUE(WriteFileAtomically(path_, "old contents").ok());
  const std::string written = path_ + ".tmp";
  std::ofstream(written) << "new contents";
  ASSERT_TRUE(CommitFileAtomically(written, path_).ok());
  EXPECT_EQ(Read(), "new contents");
  EXPECT_FALSE(fs::exists(written));

  absl::Status s = CommitFileAtomically(dir_ + "/gone.tmp", path_);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("cannot open " + dir_ + "/gone.tmp"));
  EXPECT_THAT(s.message(), HasSubstr("model.onnx is unchanged"));
  EXPECT_EQ(Read(), "new contents");
}

TEST_F(AtomicFileTest, SyncFileAndFolderNamesAMissingLog) {
  std::ofstream(dir_ + "/metrics.jsonl") << "{}\n";
  EXPECT_TRUE(SyncFileAndFolder(dir_ + "/metrics.jsonl").ok());
  absl::Status s = SyncFileAndFolder(dir_ + "/steps.jsonl");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("steps.jsonl"));
}

}  // namespace
}  // namespace tessera
