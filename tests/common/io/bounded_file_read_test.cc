#include "common/io/bounded_file_read.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

class BoundedFileReadTest : public ::testing::Test {
 protected:
  void TearDown() override { std::remove(path_.c_str()); }
  // Per process: ctest runs these cases in parallel processes.
  const std::string path_ =
      ::testing::TempDir() + "/bounded_file_read_" + std::to_string(getpid());
};

TEST_F(BoundedFileReadTest, ReadsFilesUpToTheCapExactly) {
  std::ofstream(path_, std::ios::binary) << std::string(10000, 'x') << '\0';
  absl::StatusOr<std::string> text = ReadBoundedFile(path_, 10001, "the file");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string(10000, 'x') + std::string(1, '\0'));

  std::ofstream(path_, std::ios::binary) << "";
  text = ReadBoundedFile(path_, 0, "the file");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "");
}

TEST_F(BoundedFileReadTest, OneByteOverTheCapIsRefusedNamingFileAndCap) {
  std::ofstream(path_, std::ios::binary) << std::string(10002, 'x');
  absl::StatusOr<std::string> text =
      ReadBoundedFile(path_, 10001, "--some_file=" + path_);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(),
              HasSubstr("--some_file=" + path_ +
                        " is larger than 10001 bytes, the most accepted"));
}

// An endless file ends at the cap rather than when memory runs out.
TEST(BoundedFileRead, DevZeroIsRefusedAtTheCap) {
  absl::StatusOr<std::string> text =
      ReadBoundedFile("/dev/zero", 1 << 20, "zeros");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(),
              HasSubstr("zeros is larger than 1048576 bytes"));
}

TEST(BoundedFileRead, MissingFileIsNotFoundAndNamed) {
  absl::StatusOr<std::string> text =
      ReadBoundedFile("/nonexistent/file", 100, "job file /nonexistent/file");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(),
              HasSubstr("job file /nonexistent/file: cannot be read"));
}

TEST(BoundedFileRead, DirectoryIsAReadError) {
  absl::StatusOr<std::string> text =
      ReadBoundedFile(::testing::TempDir(), 100, "the folder");
  EXPECT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("the folder"));
}

}  // namespace
}  // namespace tessera
