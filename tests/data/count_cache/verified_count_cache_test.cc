#include "data/count_cache/verified_count_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

class VerifiedCountCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/verified_count_cache_test_",
                        getpid());
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/data";
    Write(path_, "abcd");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static void Write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  // Sets the file's modification time to `seconds` after the epoch.
  static void SetMtime(const std::string& path, time_t seconds) {
    struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  }

  // Counts by calling count_, recording the call.
  absl::StatusOr<int64_t> Count() {
    return cache_.Count(path_, [this]() -> absl::StatusOr<int64_t> {
      ++calls_;
      return next_;
    });
  }

  std::string dir_;
  std::string path_;
  VerifiedCountCache cache_;
  int calls_ = 0;
  absl::StatusOr<int64_t> next_ = 7;
};

TEST_F(VerifiedCountCacheTest, AnUnchangedFileIsCountedOnce) {
  EXPECT_EQ(*Count(), 7);
  next_ = 8;  // a second count would show
  EXPECT_EQ(*Count(), 7);
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(cache_.hits(), 1);
  EXPECT_EQ(cache_.misses(), 1);
}

TEST_F(VerifiedCountCacheTest, AFileOfAnotherSizeIsCountedAgain) {
  SetMtime(path_, 1000);
  EXPECT_EQ(*Count(), 7);
  Write(path_, "abcdef");
  SetMtime(path_, 1000);  // only the size tells
  next_ = 9;
  EXPECT_EQ(*Count(), 9);
  EXPECT_EQ(calls_, 2);
  EXPECT_EQ(*Count(), 9);
  EXPECT_EQ(calls_, 2);
}

TEST_F(VerifiedCountCacheTest, AFileModifiedSinceIsCountedAgain) {
  SetMtime(path_, 1000);
  EXPECT_EQ(*Count(), 7);
  Write(path_, "wxyz");  // same size
  SetMtime(path_, 2000);
  next_ = 3;
  EXPECT_EQ(*Count(), 3);
  EXPECT_EQ(calls_, 2);
}

TEST_F(VerifiedCountCacheTest, AFileReplacedByAnotherIsCountedAgain) {
  SetMtime(path_, 1000);
  EXPECT_EQ(*Count(), 7);
  // Same size and time, but another file renamed over it (a new inode).
  const std::string other = dir_ + "/other";
  Write(other, "wxyz");
  SetMtime(other, 1000);
  ASSERT_EQ(std::rename(other.c_str(), path_.c_str()), 0);
  next_ = 4;
  EXPECT_EQ(*Count(), 4);
  EXPECT_EQ(calls_, 2);
}

TEST_F(VerifiedCountCacheTest, AFailedCountIsNotKept) {
  next_ = absl::DataLossError("data: truncated or lying header");
  absl::StatusOr<int64_t> first = Count();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().message(), "data: truncated or lying header");
  next_ = 5;
  EXPECT_EQ(*Count(), 5);
  EXPECT_EQ(*Count(), 5);
  EXPECT_EQ(calls_, 2);
}

TEST_F(VerifiedCountCacheTest, AMissingFileIsCountedEveryTime) {
  path_ = dir_ + "/missing";
  next_ = absl::NotFoundError("missing: no such file");
  EXPECT_TRUE(absl::IsNotFound(Count().status()));
  EXPECT_TRUE(absl::IsNotFound(Count().status()));
  EXPECT_EQ(calls_, 2);
}

TEST_F(VerifiedCountCacheTest, EachPathHasItsOwnCount) {
  EXPECT_EQ(*Count(), 7);
  path_ = dir_ + "/second";
  Write(path_, "ab");
  next_ = 2;
  EXPECT_EQ(*Count(), 2);
  path_ = dir_ + "/data";
  EXPECT_EQ(*Count(), 7);
  EXPECT_EQ(calls_, 2);
}

}  // namespace
}  // namespace tessera
