#include "coordinator/report/metrics_writer.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/tensorboard/event_file_reader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class PendingEpochTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/pending_epoch_", getpid(), "_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    null_ = std::fopen("/dev/null", "w");
    writer_ = std::make_unique<MetricsWriter>(dir_, "sync", null_);
    epoch_.epoch = 3;
    epoch_.steps = 94;
    epoch_.examples = 3000;
    epoch_.test_accuracy = 0.8;
  }
  void TearDown() override {
    writer_.reset();
    std::fclose(null_);
    fs::remove_all(dir_);
  }
  std::vector<std::string> Lines() const {
    std::ifstream in(dir_ + "/metrics.jsonl");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }

  std::string dir_;
  std::FILE* null_ = nullptr;
  std::unique_ptr<MetricsWriter> writer_;
  EpochResult epoch_;
};

// The chaos test's lost line: the coordinator committed the checkpoint
// after epoch 3 and was killed before writing epoch 3's line; the next
// one resumes at epoch 4 and never trains epoch 3 again.
TEST_F(PendingEpochTest, ALineLostAfterItsCheckpointIsWrittenOnResume) {
  ASSERT_TRUE(writer_->StagePendingEpoch(epoch_, -1).ok());
  EXPECT_EQ(writer_->RecoverPendingEpoch(4), 3);
  ASSERT_EQ(Lines().size(), 1u);
  EXPECT_NE(Lines()[0].find("\"epoch\":3"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/metrics.pending"));
}

// The checkpoint was not committed: the epoch is trained again and gets
// its line then.
TEST_F(PendingEpochTest, AnEpochTrainedAgainIsNotWrittenFromThePendingLine) {
  ASSERT_TRUE(writer_->StagePendingEpoch(epoch_, -1).ok());
  EXPECT_EQ(writer_->RecoverPendingEpoch(3), 0);
  EXPECT_TRUE(Lines().empty());
  EXPECT_FALSE(fs::exists(dir_ + "/metrics.pending"));
}

TEST_F(PendingEpochTest, ALineWrittenBeforeTheKillIsNotWrittenTwice) {
  ASSERT_TRUE(writer_->StagePendingEpoch(epoch_, -1).ok());
  writer_->WriteEpoch(epoch_, -1);
  EXPECT_FALSE(fs::exists(dir_ + "/metrics.pending"));
  // Killed after the line, before the pending file went.
  ASSERT_TRUE(writer_->StagePendingEpoch(epoch_, -1).ok());
  EXPECT_EQ(writer_->RecoverPendingEpoch(4), 0);
  EXPECT_EQ(Lines().size(), 1u);
}

// A chief killed in the middle of a step's line: the next chief's first
// line starts a line of its own, and every line of steps.jsonl parses.
TEST_F(PendingEpochTest, ARestartedWriterLeavesWholeStepLinesOnly) {
  std::ofstream(dir_ + "/steps.jsonl")
      << "{\"epoch\":1,\"step\":1893}\n{\"epoch\":1,\"st";
  ASSERT_TRUE(writer_->Open().ok());
  StepResponse response;
  response.set_loss(0.5);
  writer_->RecordStep(0, 1, response);
  writer_->WriteEpoch(epoch_, -1);
  std::ifstream in(dir_ + "/steps.jsonl");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "{\"epoch\":1,\"step\":1893}");
  for (const std::string& l : lines) {
    EXPECT_FALSE(nlohmann::json::parse(l, nullptr, false).is_discarded()) << l;
  }
  EXPECT_TRUE(writer_->write_failures().empty());
}

// The same for metrics.jsonl, which a kill may tear as well.
TEST_F(PendingEpochTest, AnEpochLineAfterATornOneStartsALineOfItsOwn) {
  std::ofstream(dir_ + "/metrics.jsonl") << "{\"epoch\":2,\"ste";
  writer_->WriteEpoch(epoch_, -1);
  ASSERT_EQ(Lines().size(), 1u);
  EXPECT_NE(Lines()[0].find("\"epoch\":3"), std::string::npos);
  EXPECT_FALSE(
      nlohmann::json::parse(Lines()[0], nullptr, false).is_discarded());
}

// A regression's epoch line has its losses (the MSE) and no accuracy, and
// its run folder no accuracy chart (#42: "accuracy 0.0000" in every line).
TEST_F(PendingEpochTest, ARegressionLineHasNoAccuracy) {
  epoch_.has_accuracy = false;
  epoch_.test_loss = 0.25;
  writer_->WriteEpoch(epoch_, -1);
  writer_->WriteCharts({epoch_});
  ASSERT_EQ(Lines().size(), 1u);
  const nlohmann::json line = nlohmann::json::parse(Lines()[0]);
  EXPECT_FALSE(line.contains("test_accuracy")) << Lines()[0];
  EXPECT_FALSE(line.contains("train_accuracy")) << Lines()[0];
  EXPECT_EQ(line["test_loss"].get<double>(), 0.25);
  EXPECT_TRUE(fs::exists(dir_ + "/loss.svg"));
  EXPECT_FALSE(fs::exists(dir_ + "/accuracy.svg"));
}

TEST_F(PendingEpochTest, AClassifierLineHasItsAccuracy) {
  writer_->WriteEpoch(epoch_, -1);
  writer_->WriteCharts({epoch_});
  const nlohmann::json line = nlohmann::json::parse(Lines()[0]);
  EXPECT_EQ(line["test_accuracy"].get<double>(), 0.8);
  EXPECT_TRUE(fs::exists(dir_ + "/accuracy.svg"));
}

// The scalars of epoch `epoch` in the run's TensorBoard events, by tag.
std::map<std::string, float> EpochScalars(const std::string& dir, int epoch) {
  std::map<std::string, float> scalars;
  absl::StatusOr<std::vector<std::string>> files =
      ListEventFiles(dir + "/tensorboard");
  if (!files.ok()) return scalars;
  for (const std::string& file : *files) {
    absl::StatusOr<std::vector<tensorboard::Event>> events =
        ReadEventFile(file);
    if (!events.ok()) continue;
    for (const tensorboard::Event& e : *events) {
      if (e.step() != epoch || !e.has_summary()) continue;
      for (const auto& v : e.summary().value()) {
        if (v.has_simple_value()) scalars[v.tag()] = v.simple_value();
      }
    }
  }
  return scalars;
}

// #48: an epoch whose line a restarted coordinator wrote from
// metrics.pending got no TensorBoard events, so TensorBoard missed the
// epoch that metrics.jsonl had.
TEST_F(PendingEpochTest, AnEpochRecoveredFromThePendingLineGetsItsEvents) {
  ASSERT_TRUE(writer_->StagePendingEpoch(epoch_, -1).ok());
  // The next coordinator: a new writer of the same run folder.
  MetricsWriter next(dir_, "sync", null_);
  ASSERT_TRUE(next.Open().ok());
  EXPECT_EQ(next.RecoverPendingEpoch(4), 3);
  const std::map<std::string, float> scalars = EpochScalars(dir_, 3);
  ASSERT_TRUE(scalars.count("epoch/test_accuracy")) << scalars.size();
  EXPECT_FLOAT_EQ(scalars.at("epoch/test_accuracy"), 0.8f);
}

// Every step's line is in steps.jsonl as soon as it is recorded, so that a
// chief killed mid-epoch leaves them all for the count of steps re-run.
TEST_F(PendingEpochTest, AStepLineIsOnTheDiskAtOnce) {
  ASSERT_TRUE(writer_->Open().ok());
  StepResponse response;
  response.set_loss(0.5);
  writer_->RecordStep(7, 1, response);
  std::ifstream in(dir_ + "/steps.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_NE(line.find("\"step\":7"), std::string::npos) << line;
}

}  // namespace
}  // namespace tessera
