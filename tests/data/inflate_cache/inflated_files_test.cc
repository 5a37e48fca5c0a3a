#include "data/inflate_cache/inflated_files.h"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class InflatedFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat(
               "inflated_", getpid(), "_",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    cache_ = (dir_ / "cache").string();
  }

  std::string WriteGzip(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / "data" / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return path;
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path dir_;
  std::string cache_;
};

TEST_F(InflatedFilesTest, GzipFileIsReadThroughOneInflatedCopy) {
  const std::string bytes(100000, 'x');
  const std::string path = WriteGzip("train-images-idx3-ubyte.gz", bytes);
  InflatedFiles files(cache_);
  const std::string inflated = files.PathFor(path);
  ASSERT_NE(inflated, path);
  EXPECT_EQ(fs::path(inflated).filename(), "train-images-idx3-ubyte");
  EXPECT_EQ(Read(inflated), bytes);
  const auto made = fs::last_write_time(inflated);
  // Another worker of the machine (another object) finds it.
  EXPECT_EQ(InflatedFiles(cache_).PathFor(path), inflated);
  EXPECT_EQ(fs::last_write_time(inflated), made);
}

TEST_F(InflatedFilesTest, PlainFilesAndAnOffCacheReadTheFileItself) {
  const std::string plain = (dir_ / "data" / "plain").string();
  std::ofstream(plain) << "not compressed";
  EXPECT_EQ(InflatedFiles(cache_).PathFor(plain), plain);
  const std::string gz = WriteGzip("a.gz", "abc");
  EXPECT_EQ(InflatedFiles("").PathFor(gz), gz);
  const std::string missing = (dir_ / "data" / "missing.gz").string();
  EXPECT_EQ(InflatedFiles(cache_).PathFor(missing), missing);
}

TEST_F(InflatedFilesTest, AChangedFileGetsANewCopy) {
  const std::string path = WriteGzip("labels.gz", std::string(1000, 'a'));
  InflatedFiles files(cache_);
  const std::string first = files.PathFor(path);
  WriteGzip("labels.gz", std::string(2000, 'b'));
  const std::string second = files.PathFor(path);
  EXPECT_NE(first, second);
  EXPECT_EQ(Read(second), std::string(2000, 'b'));
}

TEST_F(InflatedFilesTest, ACorruptFileIsReadAsItIsAndLeavesNoCopy) {
  const std::string path = WriteGzip("broken.gz", std::string(50000, 'q'));
  fs::resize_file(path, fs::file_size(path) / 2);
  EXPECT_EQ(InflatedFiles(cache_).PathFor(path), path);
  for (const auto& entry : fs::recursive_directory_iterator(cache_)) {
    EXPECT_FALSE(entry.is_regular_file() && entry.path().filename() == "broken")
        << entry.path();
  }
}

TEST_F(InflatedFilesTest, ACacheFolderThatCannotBeMadeReadsTheFile) {
  const std::string path = WriteGzip("a.gz", "abc");
  std::ofstream(cache_) << "a file where the folder should be";
  EXPECT_EQ(InflatedFiles(cache_).PathFor(path), path);
}

TEST_F(InflatedFilesTest, WorkersAskingAtOnceShareOneCopy) {
  std::string bytes(3 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  const std::string path = WriteGzip("big.gz", bytes);
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back(
        [&, t] { got[t] = InflatedFiles(cache_).PathFor(path); });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& g : got) EXPECT_EQ(g, got[0]);
  EXPECT_EQ(Read(got[0]), bytes);
}

TEST_F(InflatedFilesTest, RewriteLeavesStreamedFilesAlone) {
  DataConfig data;
  data.set_train_images(WriteGzip("ti.gz", "images"));
  data.set_test_labels(WriteGzip("tl.gz", "labels"));
  DataConfig rewritten = InflatedFiles(cache_).Rewrite(data);
  EXPECT_EQ(Read(rewritten.train_images()), "images");
  EXPECT_EQ(Read(rewritten.test_labels()), "labels");
  EXPECT_TRUE(rewritten.train_labels().empty());
  data.add_train_files(data.train_images());
  EXPECT_EQ(InflatedFiles(cache_).Rewrite(data).train_images(),
            data.train_images());
}

}  // namespace
}  // namespace tessera
