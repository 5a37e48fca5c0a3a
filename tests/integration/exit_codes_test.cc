// Every tool's exit code for the user's mistakes (common/exit_code.h,
// docs/exit_codes.md): each binary given a path that is not there exits 2
// and names the path; a glob in a missing folder fails the job with 2 and
// the folder named, not 1 and UNAVAILABLE.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scratch_dir.h"
#include "tests/shell_command.h"
#include "tests/skip_unless_required.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";
// Under a folder that does not exist: no tool may create it.
constexpr char kMissing[] = "/nonexistent-tessera/ck";

class ExitCodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ScratchDir(absl::StrCat(
        "tessera_exit_", getpid(), "_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Bin(const std::string& path) {
    return absl::StrCat(BuildDir(), "/", path);
  }

  fs::path dir_;
};

TEST_F(ExitCodesTest, EachToolExitsTwoNamingTheBadPath) {
  struct Case {
    std::string command;
    std::string named;  // what the error must name
  };
  const std::string missing = kMissing;
  const std::string under_file = "/dev/null/tessera";  // cannot be made
  const std::vector<Case> cases = {
      {Bin("worker/predict/tessera_predict --checkpoint=") + missing, missing},
      {Bin("worker/export/tessera_export --output=/dev/null --checkpoint=") +
           missing,
       missing},
      // A folder under a missing one: refused at once, not waited on.
      {"timeout 60 " +
           Bin("worker/evaluate/tessera_evaluator --checkpoint_dir=") + missing,
       "/nonexistent-tessera does not exist"},
      {Bin("worker/tools/tessera_local_train --job_file=") + missing +
           "/job.textproto",
       missing + "/job.textproto"},
      {Bin("worker/tools/tessera_local_train --job_file=") +
           TESSERA_SOURCE_DIR +
           "/deploy/jobs/mlp_fashion_mnist.textproto --data_dir=" + missing,
       missing},
      {Bin("worker/tessera_to_tfrecord --images=") + missing +
           "/images --labels=" + missing +
           "/labels --prefix=" + (dir_ / "out/train").string(),
       missing + "/images"},
      {Bin("worker/tessera_to_tfrecord --images=/dev/null --labels=/dev/null "
           "--prefix=") +
           under_file + "/train",
       under_file},
      {Bin("worker/tessera_ctr_gen --train_examples=10 --test_examples=10 "
           "--out_dir=") +
           under_file,
       under_file},
      {Bin("coordinator/tessera_ctl --coordinator=127.0.0.1:1 "
           "--job_token_file=") +
           missing + "/token status",
       missing + "/token"},
      {"TF_CONFIG='{\"cluster\": {\"chief\": [\"127.0.0.1:1\"], \"ps\": "
       "[\"127.0.0.1:2\"], \"worker\": [\"127.0.0.1:3\"]}, \"task\": "
       "{\"type\": \"chief\", \"index\": 0}}' " +
           Bin("coordinator/tessera_coordinator --job_file=") + missing +
           "/job.textproto",
       missing + "/job.textproto"},
      {Bin("deploy/local/tessera_local --run_dir=") + under_file +
           " -- --epochs=1",
       under_file},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.command);
    const ShellResult run = Shell(c.command);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_THAT(run.output, HasSubstr(c.named));
  }
  EXPECT_FALSE(fs::exists("/nonexistent-tessera"));
}

// Checkpoint intervals that mean nothing are the user's to fix, before
// the cluster is waited for: a negative one, or one without a folder to
// write into.
TEST_F(ExitCodesTest, CheckpointIntervalsThatMeanNothingExitTwo) {
  const std::string coordinator = absl::StrCat(
      "TF_CONFIG='{\"cluster\": {\"chief\": [\"127.0.0.1:1\"], \"ps\": "
      "[\"127.0.0.1:2\"], \"worker\": [\"127.0.0.1:3\"]}, \"task\": "
      "{\"type\": \"chief\", \"index\": 0}}' ",
      Bin("coordinator/tessera_coordinator"));
  for (const std::string flags :
       {"--checkpoint_every_steps=-1 --checkpoint_dir=/tmp",
        "--checkpoint_every_seconds=-2 --checkpoint_dir=/tmp",
        "--checkpoint_every_seconds=nan --checkpoint_dir=/tmp",
        "--checkpoint_every_seconds=30"}) {
    SCOPED_TRACE(flags);
    const ShellResult run = Shell(absl::StrCat(coordinator, " ", flags));
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_THAT(run.output, HasSubstr(flags.substr(0, flags.find('='))));
  }
}

// Streamed data whose glob names a folder that is not there: the worker
// refuses its files at configure, and the job fails as the user's mistake
// (exit 2, no restarts) with the folder named.
TEST_F(ExitCodesTest, AGlobInAMissingFolderFailsTheJobNamingTheFolder) {
  const fs::path job = dir_ / "job.textproto";
  std::ofstream(job) << absl::StrCat(
      "model { kind: \"mlp\" input_dim: 784 hidden_units: 8 num_classes: 10 "
      "}\n"
      "data { format: \"tfrecord\" train_files: \"",
      kMissing, "/train-*\" test_files: \"", kMissing,
      "/test-*\" label_feature: \"label\" }\n");
  const ShellResult run = Shell(absl::StrCat(
      Bin("deploy/local/tessera_local"),
      " --num_ps=1 --num_workers=1 --run_dir=", (dir_ / "run").string(),
      " -- --job_file=", job.string(), " --epochs=1"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output,
              HasSubstr(absl::StrCat("folder ", kMissing, " does not exist")));
  EXPECT_THAT(run.output, Not(HasSubstr("UNAVAILABLE")));
  EXPECT_THAT(run.output, Not(HasSubstr("restart 1")));
}

// A data file that is not there is the user's to fix too (it was exit 1, a
// failure worth restarting).
TEST_F(ExitCodesTest, AMissingIdxFileFailsTheJobWithTwo) {
  if (!fs::exists(kData))
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireData) << kData << " is not installed";
  const fs::path data = dir_ / "data";
  fs::create_directories(data);
  const ShellResult run = Shell(absl::StrCat(
      Bin("deploy/local/tessera_local"), " --num_ps=1 --num_workers=1",
      " --run_dir=", (dir_ / "run").string(),
      " -- --epochs=1 --data_dir=", data.string()));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("train-images-idx3-ubyte"));
}

TEST_F(ExitCodesTest, PredictRefusesCountsThatMeanNothing) {
  for (const std::string flag :
       {"--max_examples=0", "--max_examples=-5", "--threads=-1"}) {
    SCOPED_TRACE(flag);
    const ShellResult run =
        Shell(absl::StrCat(Bin("worker/predict/tessera_predict"), " ", flag,
                           " --checkpoint=", dir_.string()));
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_THAT(run.output, HasSubstr(flag.substr(0, flag.find('='))));
    EXPECT_THAT(run.output, Not(HasSubstr("accuracy")));
  }
}

// The README's conversion into a folder that does not exist yet.
TEST_F(ExitCodesTest, ToTfrecordCreatesThePrefixFolder) {
  if (!fs::exists(kData))
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireData) << kData << " is not installed";
  const fs::path prefix = dir_ / "data/fm/train";
  const ShellResult run = Shell(absl::StrCat(
      Bin("worker/tessera_to_tfrecord"), " --images=", kData,
      "/t10k-images-idx3-ubyte.gz --labels=", kData,
      "/t10k-labels-idx1-ubyte.gz --examples=10 --shards=2 --prefix=",
      prefix.string()));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(fs::exists(prefix.string() + "-00000-of-00002.tfrecord"))
      << run.output;
}

// A checkpoint folder that may yet appear: the evaluator says what it
// waits for, where, instead of printing nothing.
TEST_F(ExitCodesTest, EvaluatorSaysWhatItWaitsFor) {
  const std::string root = (dir_ / "checkpoints").string();
  const ShellResult run = Shell(absl::StrCat(
      "timeout 60 ", Bin("worker/evaluate/tessera_evaluator"),
      " --checkpoint_dir=", root, " --poll_seconds=0.05 --max_idle_seconds=1"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output,
              HasSubstr(absl::StrCat("waiting for a checkpoint in ", root)));
  EXPECT_THAT(run.output, HasSubstr("manifest"));
}

TEST_F(ExitCodesTest, EmptyCheckpointDirIsRefused) {
  const ShellResult run = Shell(
      absl::StrCat("timeout 60 ", Bin("worker/evaluate/tessera_evaluator"),
                   " --checkpoint_dir="));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--checkpoint_dir is required"));
  EXPECT_THAT(run.output, Not(HasSubstr("cannot create")));
}

}  // namespace
}  // namespace tessera
