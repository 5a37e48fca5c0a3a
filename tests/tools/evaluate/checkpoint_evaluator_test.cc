#include "tools/evaluate/checkpoint_evaluator.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tools/local_train/local_trainer.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] = R"pb(
  model_def {
    inputs {
      name: "image"
      dense { shape: [ 784 ] }
    }
    label { kind: CLASS_INDEX num_classes: 10 }
    layers {
      name: "h"
      inputs: "image"
      dense { units: 16 activation: RELU }
    }
    layers {
      name: "logits"
      inputs: "h"
      dense { units: 10 }
    }
    loss { kind: SOFTMAX_CROSS_ENTROPY input: "logits" }
  }
  data {
    format: "idx"
    train_images: "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
    train_labels: "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"
    test_images: "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
    test_labels: "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"
    train_examples: 512
    test_examples: 200
  }
  optimizer {
    learning_rate: 0.01
    adam { beta1: 0.9 beta2: 0.999 epsilon: 1e-7 }
  }
  schedule { epochs: 1 batch_size: 64 seed: 3 }
)pb";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class CheckpointEvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kJob, &job_));
    dir_ = absl::StrCat(::testing::TempDir(), "/evaluator-", getpid());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  EvaluatorOptions Options() const {
    EvaluatorOptions o;
    o.checkpoint_root = dir_ + "/checkpoints";
    o.run_dir = dir_ + "/run";
    o.poll = absl::Milliseconds(10);
    o.max_idle = absl::Milliseconds(300);
    return o;
  }

  JobConfig job_;
  std::string dir_;
  CpuBackend cpu_;
};

TEST_F(CheckpointEvaluatorTest, EvaluatesTheFinalCheckpointAsTrainingDid) {
  absl::StatusOr<std::unique_ptr<LocalTrainer>> trainer =
      LocalTrainer::Create(job_, &cpu_);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  absl::StatusOr<LocalEpoch> epoch = (*trainer)->RunEpoch(1, nullptr);
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  ASSERT_TRUE((*trainer)->SaveCheckpoint(dir_ + "/checkpoints", 1).ok());

  CheckpointEvaluator evaluator(Options(), &cpu_);
  std::vector<std::string> lines;
  ASSERT_TRUE(evaluator
                  .Run([] { return false; },
                       [&](const std::string& l) { lines.push_back(l); })
                  .ok());
  // The final checkpoint (its epoch past the job's last) ends the run.
  EXPECT_EQ(evaluator.evaluated(), 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr(absl::StrFormat("accuracy %.4f",
                                                  epoch->test_accuracy)));
  const std::string jsonl = ReadAll(dir_ + "/run/eval.jsonl");
  EXPECT_THAT(jsonl, HasSubstr("\"after_epoch\":1"));
  EXPECT_THAT(jsonl, HasSubstr("\"examples\":200"));
  EXPECT_THAT(jsonl, HasSubstr("\"auc\":null"));
  EXPECT_FALSE(std::filesystem::is_empty(dir_ + "/run/tensorboard/eval"));
}

TEST_F(CheckpointEvaluatorTest, SkipsACheckpointItCannotReadAndGoesOn) {
  absl::StatusOr<std::unique_ptr<LocalTrainer>> trainer =
      LocalTrainer::Create(job_, &cpu_);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  absl::StatusOr<std::string> saved =
      (*trainer)->SaveCheckpoint(dir_ + "/checkpoints", 0);
  ASSERT_TRUE(saved.ok()) << saved.status();
  std::filesystem::remove(*saved + "/ps-0.shards");

  CheckpointEvaluator evaluator(Options(), &cpu_);
  std::vector<std::string> lines;
  ASSERT_TRUE(evaluator
                  .Run([] { return false; },
                       [&](const std::string& l) { lines.push_back(l); })
                  .ok());
  EXPECT_EQ(evaluator.evaluated(), 0);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], HasSubstr("skipped"));
  EXPECT_THAT(lines[0], HasSubstr("ps-0.shards"));
  EXPECT_THAT(lines[1], HasSubstr("waiting for a checkpoint newer than"));
  EXPECT_THAT(lines[2], HasSubstr("no new checkpoint"));
}

TEST_F(CheckpointEvaluatorTest, SaysWhatItWaitsForOnceAPeriod) {
  EvaluatorOptions options = Options();
  options.max_idle = absl::ZeroDuration();  // wait for ever
  options.poll = absl::Milliseconds(1);
  options.wait_report_every = absl::Hours(1);
  std::filesystem::create_directories(dir_);
  CheckpointEvaluator evaluator(options, &cpu_);
  std::vector<std::string> lines;
  int polls = 0;
  ASSERT_TRUE(evaluator
                  .Run([&] { return ++polls > 50; },
                       [&](const std::string& l) { lines.push_back(l); })
                  .ok());
  // Fifty polls, one line: the folder, what file makes a checkpoint, and
  // that the folder is not there yet.
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr(absl::StrCat("waiting for a checkpoint in ",
                                               dir_, "/checkpoints")));
  EXPECT_THAT(lines[0], HasSubstr("ckpt-<step> holding a manifest file"));
  EXPECT_THAT(lines[0], HasSubstr("does not exist yet"));
}

TEST_F(CheckpointEvaluatorTest, RefusesAFolderUnderAMissingOne) {
  EvaluatorOptions options = Options();
  options.checkpoint_root = dir_ + "/missing/checkpoints";
  options.run_dir = dir_ + "/missing";
  CheckpointEvaluator evaluator(options, &cpu_);
  const absl::Status s =
      evaluator.Run([] { return false; }, [](const std::string&) {});
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  // The parent named (TempDir() may end in a slash: the path is normalized).
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("evaluator-", getpid(),
                                                  "/missing does not exist")));
  // Refused before anything was made: the mistyped folder is not created.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/missing"));

  options.checkpoint_root = "";
  CheckpointEvaluator empty(options, &cpu_);
  const absl::Status e =
      empty.Run([] { return false; }, [](const std::string&) {});
  EXPECT_TRUE(absl::IsInvalidArgument(e)) << e;
  EXPECT_THAT(e.message(), HasSubstr("no checkpoint folder given"));
}

}  // namespace
}  // namespace tessera
