#include "common/io/line_log.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class LineLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = absl::StrCat(
        ::testing::TempDir(), "/line_log_", getpid(), "_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove(path_);
  }
  void TearDown() override { fs::remove(path_); }
  void Write(const std::string& text) const {
    std::ofstream(path_, std::ios::binary) << text;
  }
  std::string Read() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string path_;
};

// The defect: a restarted chief appended to the dead chief's torn line,
// and steps.jsonl held `{"step":1894}{"correct":4,"step":0}`.
TEST_F(LineLogTest, AnAppendAfterATornLineStartsALineOfItsOwn) {
  Write("{\"step\":1893}\n{\"step\":18");
  ASSERT_TRUE(AppendWholeLine(path_, "{\"step\":0}").ok());
  EXPECT_EQ(Read(), "{\"step\":1893}\n{\"step\":0}\n");
}

TEST_F(LineLogTest, CutsOnlyTheTornTail) {
  Write("a\nbb\nccc");
  absl::StatusOr<int64_t> cut = CutTornLastLine(path_);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(*cut, 3);
  EXPECT_EQ(Read(), "a\nbb\n");
}

TEST_F(LineLogTest, AWholeFileIsLeftAsItIs) {
  Write("a\nbb\n");
  EXPECT_EQ(*CutTornLastLine(path_), 0);
  EXPECT_EQ(Read(), "a\nbb\n");
}

TEST_F(LineLogTest, AFileOfOneTornLineBecomesEmpty) {
  Write("{\"ste");
  EXPECT_EQ(*CutTornLastLine(path_), 5);
  EXPECT_EQ(Read(), "");
}

// The backward scan crosses its 4 KiB blocks.
TEST_F(LineLogTest, ATornLineLongerThanABlockIsCutWhole) {
  const std::string whole = "x\n";
  const std::string torn(10000, 'y');
  Write(whole + torn);
  EXPECT_EQ(*CutTornLastLine(path_), 10000);
  EXPECT_EQ(Read(), whole);
}

TEST_F(LineLogTest, AMissingFileIsCreatedByTheAppend) {
  EXPECT_EQ(*CutTornLastLine(path_), 0);
  ASSERT_TRUE(AppendWholeLine(path_, "first").ok());
  ASSERT_TRUE(AppendWholeLine(path_, "second").ok());
  EXPECT_EQ(Read(), "first\nsecond\n");
}

TEST_F(LineLogTest, AFullDiskIsAnErrorNamingTheFile) {
  fs::create_symlink("/dev/full", path_);
  absl::Status s = AppendWholeLine(path_, "line");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path_), std::string::npos) << s;
  EXPECT_NE(s.message().find("No space left"), std::string::npos) << s;
}

}  // namespace
}  // namespace tessera
