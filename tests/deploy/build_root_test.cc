#include "deploy/build_root.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class BinaryUnderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("build_root_test." + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
};

TEST_F(BinaryUnderTest, ABuildTreeHasEachBinaryInItsFolder) {
  const std::string root = root_.string();
  EXPECT_EQ(BinaryUnder(root, "tessera_ps"), root + "/ps_server/tessera_ps");
  EXPECT_EQ(BinaryUnder(root, "tessera_worker"),
            root + "/worker/tessera_worker");
  EXPECT_EQ(BinaryUnder(root, "tessera_coordinator"),
            root + "/coordinator/tessera_coordinator");
  EXPECT_EQ(BinaryUnder(root, "tessera_evaluator"),
            root + "/worker/evaluate/tessera_evaluator");
}

// deploy/bundle.sh puts every binary in one bin/ folder.
TEST_F(BinaryUnderTest, ABundlesBinFolderHasThemAllTogether) {
  const std::string bin = (root_ / "bin").string();
  fs::create_directories(bin);
  for (const char* name : {"tessera_ps", "tessera_worker",
                           "tessera_coordinator", "tessera_evaluator"}) {
    std::ofstream(bin + "/" + name) << "#!/bin/sh\n";
    EXPECT_EQ(BinaryUnder(bin, name), bin + "/" + name);
  }
}

}  // namespace
}  // namespace tessera
