#include "common/process/fault_point.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class FaultPointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ =
        fs::path(::testing::TempDir()) /
        absl::StrCat(
            "fault_points_", getpid(), "_",
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }
  void Lay(const std::string& point, const std::string& text) const {
    std::ofstream(folder_ / ("test-0." + point)) << text;
  }
  bool Hit(const std::string& point) const {
    return fs::exists(folder_ / ("test-0." + point + ".hit"));
  }

  fs::path folder_;
};

// A point acts only when the test lays its file, and only once.
TEST_F(FaultPointTest, AnsweredOnceByItsFile) {
  EnableFaultPoints(folder_.string(), "test-0");
  FaultPoint("configure");
  EXPECT_FALSE(Hit("configure"));
  Lay("configure", "note");
  FaultPoint("other");
  EXPECT_FALSE(Hit("configure"));
  FaultPoint("configure");
  EXPECT_TRUE(Hit("configure"));
  EXPECT_FALSE(fs::exists(folder_ / "test-0.configure"));
}

// "note 2": the point passes twice, the third pass is the hit.
TEST_F(FaultPointTest, ACountLetsThePointPassFirst) {
  EnableFaultPoints(folder_.string(), "test-0");
  Lay("step", "note 2");
  FaultPoint("step");
  FaultPoint("step");
  EXPECT_FALSE(Hit("step"));
  FaultPoint("step");
  EXPECT_TRUE(Hit("step"));
}

TEST_F(FaultPointTest, KillEndsTheProcessAtThePoint) {
  EXPECT_EXIT(
      {
        EnableFaultPoints(folder_.string(), "test-0");
        Lay("step", "kill");
        FaultPoint("step");
        std::exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGKILL), "");
  EXPECT_TRUE(Hit("step"));
}

}  // namespace
}  // namespace tessera
