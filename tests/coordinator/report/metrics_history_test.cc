#include "coordinator/report/metrics_history.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "coordinator/report/job_summary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

std::string WriteMetrics(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/history_",
                                        getpid(), "_", name, ".jsonl");
  std::ofstream(path) << text;
  return path;
}

// Epoch 2 was written twice (trained again after a parameter server lost
// its shards), extra steps once, and the kill cut the last line short.
constexpr char kMetrics[] =
    R"({"epoch":1,"steps":94,"examples":3000,"test_accuracy":0.74,"seconds":1.5,"steps_rerun":2}
{"epoch":2,"steps":94,"examples":3000,"test_accuracy":0.70,"seconds":1.0}
{"epoch":2,"steps":94,"examples":3000,"test_accuracy":0.78,"seconds":1.0,"steps_rerun":3}
{"epoch":2,"extra_steps":"steps 1-10","steps":10,"examples":320}
{"epoch":3,"steps":94,"examples":3000,"test_acc)";

TEST(MetricsHistoryTest, ReadsEveryEpochLineAndSkipsATornOne) {
  std::vector<EpochResult> lines =
      ReadEpochHistory(WriteMetrics("torn", kMetrics));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].epoch, 1);
  EXPECT_EQ(lines[0].steps_rerun, 2);
  EXPECT_DOUBLE_EQ(lines[2].test_accuracy, 0.78);
}

TEST(MetricsHistoryTest, NoFileNoHistory) {
  EXPECT_TRUE(ReadEpochHistory("/nonexistent/metrics.jsonl").empty());
}

TEST(MetricsHistoryTest, EpochsBeforeKeepsTheLastLineOfEachEpoch) {
  std::vector<EpochResult> epochs =
      EpochsBefore(ReadEpochHistory(WriteMetrics("before", kMetrics)), 3);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[1].epoch, 2);
  EXPECT_DOUBLE_EQ(epochs[1].test_accuracy, 0.78);
  // Resuming at epoch 2 trains it again: only epoch 1 is history.
  EXPECT_EQ(
      EpochsBefore(ReadEpochHistory(WriteMetrics("at2", kMetrics)), 2).size(),
      1u);
}

// The issue's summary after a chief restart counted from the restart
// ("after 20 epochs; 1200000 examples" for a 40-epoch job).
TEST(MetricsHistoryTest, SummaryCountsTheJobAcrossACoordinatorRestart) {
  JobSummary summary;
  summary.results =
      EpochsBefore(ReadEpochHistory(WriteMetrics("summary", kMetrics)), 3);
  summary.resumed_epochs = 2;
  EpochResult third;
  third.epoch = 3;
  third.steps = 94;
  third.examples = 3000;
  third.test_accuracy = 0.8;
  third.seconds = 1;
  summary.results.push_back(third);
  summary.steps_rerun = 5 + 1;  // the earlier coordinators' and this one's
  summary.wall = absl::Seconds(4);
  char buffer[4096] = {};
  std::FILE* out = fmemopen(buffer, sizeof(buffer) - 1, "w");
  PrintSummary(out, summary);
  std::fclose(out);
  EXPECT_THAT(buffer,
              HasSubstr("final test accuracy 0.8000 after 3 epochs (epochs "
                        "1-2 before the coordinator restarted); 9000 "
                        "examples"));
  EXPECT_THAT(buffer, HasSubstr("(this coordinator); 6 steps re-run"));
}

}  // namespace
}  // namespace tessera
