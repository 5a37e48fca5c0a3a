// 64 workers and 8 parameter servers on one machine (issue #35): as many
// processes as a small cluster's, started, configured, trained and
// stopped by tessera_local, with a tiny model on a slice of Fashion-MNIST
// for two short epochs, asynchronous and synchronous. Every epoch must
// train every example exactly once.

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/scratch_dir.h"
#include "tests/shell_command.h"
#include "tests/skip_unless_required.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";
constexpr int kWorkers = 64;
constexpr int kServers = 8;
// 40 examples a worker: the first 2,560 of the training file.
constexpr int64_t kTrain = 2560;

class ManyWorkersTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!fs::exists(kData))
      TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
          << kData << " is not installed";
    dir_ = ScratchDir(absl::StrCat("tessera_many_", getpid(), "_", GetParam()));
  }

  fs::path dir_;
};

TEST_P(ManyWorkersTest, EveryEpochTrainsEveryExampleOnce) {
  const std::string mode = GetParam();
  // Sync counts the global batch: 4 examples per worker and step, as the
  // asynchronous steps have.
  const int batch = mode == "sync" ? 4 * kWorkers : 4;
  const fs::path run_dir = dir_ / "run";
  ShellResult run = Shell(absl::StrCat(
      BuildDir(), "/deploy/local/tessera_local --num_ps=", kServers,
      " --num_workers=", kWorkers, " --run_dir=", run_dir.string(),
      " -- --epochs=2 --mode=", mode, " --batch_size=", batch,
      " --hidden_units=8 --train_examples=", kTrain,
      " --test_examples=640 --heartbeat_s=1"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Sync counts worker steps and says so (issue #42).
  EXPECT_THAT(run.output, HasSubstr(mode == "sync" ? "; 0 worker steps re-run"
                                                   : "; 0 steps re-run"));

  std::ifstream metrics(run_dir / "metrics.jsonl");
  int epochs = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    ++epochs;
    EXPECT_EQ(j["examples"].get<int64_t>(), kTrain) << "epoch " << epochs;
    EXPECT_EQ(j["mode"].get<std::string>(), mode);
  }
  EXPECT_EQ(epochs, 2) << run.output;
  // Every process had its own log, the last worker and server included.
  for (const std::string name :
       {absl::StrCat("worker-", kWorkers - 1),
        absl::StrCat("ps-", kServers - 1), std::string("chief")}) {
    EXPECT_TRUE(fs::exists(run_dir / (name + ".log"))) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ManyWorkersTest,
                         ::testing::Values("async", "sync"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace tessera
