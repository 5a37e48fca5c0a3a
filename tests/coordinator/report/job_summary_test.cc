#include "coordinator/report/job_summary.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Printed(const JobSummary& summary) {
  char buffer[4096] = {};
  std::FILE* out = fmemopen(buffer, sizeof(buffer) - 1, "w");
  PrintSummary(out, summary);
  std::fclose(out);
  return buffer;
}

EpochResult Epoch(int epoch) {
  EpochResult r;
  r.epoch = epoch;
  r.steps = 10;
  r.examples = 40;
  r.train_loss = 0.5;
  r.test_loss = 0.25;
  r.test_accuracy = 0.75;
  r.seconds = 1;
  return r;
}

// Issue #42: "parameter servers hold 113.9 MB" after 1,000 DLRM examples
// (a 2.3 MB checkpoint) was the room the growing tables reserved.
TEST(JobSummaryTest, ServerMemorySaysUsedOfAllocated) {
  JobSummary summary;
  summary.results = {Epoch(1)};
  summary.server_bytes = {57'000'000, 56'900'000};
  summary.server_used_bytes = {1'100'000, 1'200'000};
  const std::string out = Printed(summary);
  EXPECT_THAT(out, HasSubstr("parameter servers: 2.3 MB used by the rows "
                             "present, of 113.9 MB allocated (ps 0 1.1 of "
                             "57.0 MB, ps 1 1.2 of 56.9 MB)"));
  EXPECT_THAT(out, Not(HasSubstr("hold")));
}

// Issue #42: a regression's table and final line show its loss, the MSE,
// and no accuracy (which read 0.0000 in every row).
TEST(JobSummaryTest, ARegressionHasNoAccuracyColumns) {
  JobSummary summary;
  summary.has_accuracy = false;
  summary.results = {Epoch(1), Epoch(2)};
  summary.results[1].test_loss = 0.125;
  const std::string out = Printed(summary);
  EXPECT_THAT(out, HasSubstr("train_mse"));
  EXPECT_THAT(out, HasSubstr("final test loss (MSE) 0.1250 after 2 epochs"));
  EXPECT_THAT(out, Not(HasSubstr("acc")));

  char buffer[512] = {};
  std::FILE* line = fmemopen(buffer, sizeof(buffer) - 1, "w");
  EpochResult r = summary.results[1];
  r.has_accuracy = false;
  PrintEpochResult(line, r, 2, -1);
  std::fclose(line);
  EXPECT_THAT(buffer, HasSubstr("epoch 2/2: train loss (MSE) 0.5000, test "
                                "loss (MSE) 0.1250,"));
  EXPECT_THAT(buffer, Not(HasSubstr("accuracy")));
}

// Nothing trained: no empty table before the line that says so.
TEST(JobSummaryTest, NoEpochLeftPrintsNoEmptyTable) {
  const std::string out = Printed(JobSummary());
  EXPECT_THAT(out, HasSubstr("no epoch left to train"));
  EXPECT_THAT(out, Not(HasSubstr("train_loss")));
}

}  // namespace
}  // namespace tessera
