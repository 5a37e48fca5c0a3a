#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/kept_folder.h"
#include "tests/kept_key.h"
#include "tests/kept_metrics.h"

namespace tessera {
namespace kept_files_test {

namespace fs = std::filesystem;

// A job no other process keeps (nor an earlier run of this test).
std::string UniqueJob(const std::string& name) {
  static int count = 0;
  return absl::StrCat(
      "kept_files_test ", name, " ", getpid(), " ", ++count, " ",
      fs::file_time_type::clock::now().time_since_epoch().count());
}

TEST(KeptKeyTest, TheTestExecutableIsPartOfEveryKey) {
  const std::vector<fs::path> files = KeptKeyFiles({"/some/binary"});
  ASSERT_GE(files.size(), 2u);
  EXPECT_EQ(files.front(), "/proc/self/exe");
  EXPECT_EQ(files.back(), "/some/binary");
  EXPECT_EQ(KeptFileIdentity("/proc/self/exe").find("absent"),
            std::string::npos);
}

TEST(KeptKeyTest, ARebuiltBinaryChangesTheKey) {
  const fs::path binary = fs::path(::testing::TempDir()) /
                          absl::StrCat("kept_files_test_binary_", getpid());
  std::ofstream(binary) << "one";
  const std::string job = UniqueJob("key");
  const std::string before = KeptKey("p_", job, {binary});
  EXPECT_EQ(KeptKey("p_", job, {binary}), before);
  EXPECT_NE(KeptKey("p_", job + " --more", {binary}), before);
  // The same size, a later modification time.
  std::ofstream(binary) << "two";
  fs::last_write_time(binary,
                      fs::last_write_time(binary) + std::chrono::seconds(5));
  const std::string rebuilt = KeptKey("p_", job, {binary});
  EXPECT_NE(rebuilt, before);
  // The same modification time, another size.
  const auto mtime = fs::last_write_time(binary);
  std::ofstream(binary) << "three";
  fs::last_write_time(binary, mtime);
  EXPECT_NE(KeptKey("p_", job, {binary}), rebuilt);
  fs::remove(binary);
}

std::vector<nlohmann::json> TwoEpochs() {
  return {{{"epoch", 1}, {"train_loss", 0.5}},
          {{"epoch", 2}, {"train_loss", 0.25}}};
}

TEST(KeptMetricsTest, AKeptFileThatDoesNotParseIsTrainedAgain) {
  const std::string job = UniqueJob("metrics");
  const fs::path kept = KeptMetricsPath(job);
  std::ofstream(kept) << "{\"epoch\": 1}\n{\"epoch\": 2, \"train_lo";
  int trained = 0;
  const auto train = [&] {
    ++trained;
    return TwoEpochs();
  };
  EXPECT_EQ(KeptMetrics(job, 2, train), TwoEpochs());
  EXPECT_EQ(trained, 1);
  // Now kept whole: read back, not trained.
  EXPECT_EQ(KeptMetrics(job, 2, train), TwoEpochs());
  EXPECT_EQ(trained, 1);
  EXPECT_FALSE(fs::exists(absl::StrCat(kept.string(), ".", getpid())));
  fs::remove(kept);
}

TEST(KeptMetricsTest, AnIncompleteRunIsNotKept) {
  const std::string job = UniqueJob("incomplete");
  int trained = 0;
  const auto killed = [&] {
    ++trained;
    return std::vector<nlohmann::json>{TwoEpochs()[0]};
  };
  EXPECT_EQ(KeptMetrics(job, 2, killed).size(), 1u);
  EXPECT_FALSE(fs::exists(KeptMetricsPath(job)));
  EXPECT_EQ(KeptMetrics(job, 2, killed).size(), 1u);
  EXPECT_EQ(trained, 2);
  // A kept file with too few lines is trained again too.
  std::ofstream(KeptMetricsPath(job)) << "{\"epoch\": 1}\n";
  EXPECT_EQ(KeptMetrics(job, 2, TwoEpochs), TwoEpochs());
  EXPECT_EQ(KeptMetrics(job, 2, killed), TwoEpochs());
  EXPECT_EQ(trained, 2);
  fs::remove(KeptMetricsPath(job));
}

TEST(KeptFolderTest, TheLoserOfTheRenameRaceRemovesItsCopy) {
  const std::string job = UniqueJob("folder");
  fs::path mine;
  const auto fill = [&](const fs::path& into) {
    mine = into;
    // Another process fills and renames its folder first.
    const std::string name = into.filename().string();
    const fs::path theirs =
        into.parent_path() / name.substr(0, name.rfind('.'));
    fs::create_directories(theirs);
    std::ofstream(theirs / "data") << "theirs";
    std::ofstream(into / "data") << "mine";
    return true;
  };
  const fs::path kept = KeptFolder(job, "/no/tool", fill);
  EXPECT_NE(kept, mine);
  EXPECT_FALSE(fs::exists(mine));
  std::string data;
  std::ifstream(kept / "data") >> data;
  EXPECT_EQ(data, "theirs");
  fs::remove_all(kept);
}

TEST(KeptFolderTest, AFolderWhoseFillFailedIsNotKept) {
  const std::string job = UniqueJob("failed");
  int fills = 0;
  const auto fail = [&](const fs::path&) { return ++fills == 0; };
  const fs::path partial = KeptFolder(job, "/no/tool", fail);
  KeptFolder(job, "/no/tool", fail);
  EXPECT_EQ(fills, 2);
  const fs::path kept = KeptFolder(job, "/no/tool", [&](const fs::path& into) {
    std::ofstream(into / "data") << "filled";
    return true;
  });
  EXPECT_NE(kept, partial);
  EXPECT_TRUE(fs::exists(kept / "data"));
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_EQ(KeptFolder(job, "/no/tool", fail), kept);
  EXPECT_EQ(fills, 2);
  fs::remove_all(kept);
}

}  // namespace kept_files_test
}  // namespace tessera
