#include "common/job_file.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace {

class SetDataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/job_file_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Touch(const std::string& name) {
    std::ofstream(dir_ + "/" + name) << "x";
  }
  std::string dir_;
};

TEST_F(SetDataDirTest, IdxNamesTheGzippedFilesByDefault) {
  DataConfig data;
  data.set_format("idx");
  SetDataDir(dir_, &data);
  EXPECT_EQ(data.train_images(), dir_ + "/train-images-idx3-ubyte.gz");
  EXPECT_EQ(data.test_labels(), dir_ + "/t10k-labels-idx1-ubyte.gz");
}

// A folder of gunzipped IDX files (as `gunzip *.gz` leaves it) used to be
// pointed at *.gz names that do not exist.
TEST_F(SetDataDirTest, IdxPicksGunzippedFilesWhenOnlyTheyExist) {
  for (const char* name :
       {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    Touch(name);
  }
  DataConfig data;
  data.set_format("idx");
  SetDataDir(dir_, &data);
  EXPECT_EQ(data.train_images(), dir_ + "/train-images-idx3-ubyte");
  EXPECT_EQ(data.train_labels(), dir_ + "/train-labels-idx1-ubyte");
  EXPECT_EQ(data.test_images(), dir_ + "/t10k-images-idx3-ubyte");
  EXPECT_EQ(data.test_labels(), dir_ + "/t10k-labels-idx1-ubyte");
}

TEST_F(SetDataDirTest, CriteoPicksTheFileThatExists) {
  Touch("train.tsv.gz");
  Touch("test.tsv");
  DataConfig data;
  data.set_format("criteo");
  SetDataDir(dir_, &data);
  EXPECT_EQ(data.train_path(), dir_ + "/train.tsv.gz");
  EXPECT_EQ(data.test_path(), dir_ + "/test.tsv");
}

}  // namespace
}  // namespace tessera
