// StepRunner's boundaries (checkpoints inside an epoch, issue #44): once
// one is due no step is handed out until every step handed out has ended,
// in queued and lockstep modes, and the steps then go on from there.

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/byte_codec.h"
#include "common/training_mode.h"
#include "coordinator/control/job_status_board.h"
#include "coordinator/step_plan.h"
#include "coordinator/step_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/fake_worker.h"

namespace tessera {
namespace {

using ::tessera::coordinator_testing::CoordinatorFixture;
using ::testing::ElementsAre;

class IdPlan : public StepPlan {
 public:
  int64_t steps_per_epoch() const override { return 0; }
  std::vector<PlannedStep> NextEpoch() override { return {}; }
  void Describe(const PlannedStep& step, StepRequest* request) const override {
    AppendRaw(absl::MakeConstSpan(step.example_ids),
              request->mutable_example_ids());
  }
  uint64_t OnePassDigest() const override { return 0; }
};

class StepRunnerBoundaryTest
    : public CoordinatorFixture,
      public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    Start(2);
    StepRunnerOptions options;
    options.mode = *ParseTrainingMode(GetParam());
    options.num_workers = 2;
    out_ = std::tmpfile();
    runner_ = std::make_unique<StepRunner>(coord_.get(), options, &board_,
                                           nullptr, out_);
  }
  void TearDown() override { std::fclose(out_); }

  // 12 steps of 4 examples, alternating between the workers: in lockstep
  // modes 6 rounds.
  static std::vector<PlannedStep> Steps() {
    std::vector<PlannedStep> steps(12);
    for (int i = 0; i < 12; ++i) {
      steps[i].shard = i % 2;
      for (int k = 0; k < 4; ++k) steps[i].example_ids.push_back(4 * i + k);
    }
    return steps;
  }

  // Steps that ended well, each once.
  int64_t Ended() const {
    int64_t n = 0;
    for (const auto& [step, successes] : log_.Successes()) n += successes;
    return n;
  }

  JobStatusBoard board_;
  std::FILE* out_ = nullptr;
  IdPlan plan_;
  std::unique_ptr<StepRunner> runner_;
};

TEST_P(StepRunnerBoundaryTest, EveryStepHandedOutHasEndedAtTheBoundary) {
  int64_t last = 0;
  std::vector<int64_t> lefts;
  StepRunner::Boundary boundary;
  boundary.due = [&] { return runner_->next_step() - last >= 4; };
  boundary.take = [&](int64_t left, const EpochResult& so_far) {
    last = runner_->next_step();
    lefts.push_back(left);
    // The cut: nothing in flight, nothing after it handed out.
    EXPECT_EQ(Ended(), runner_->next_step());
    EXPECT_EQ(so_far.steps, runner_->next_step());
    EXPECT_EQ(so_far.examples, 4 * runner_->next_step());
    EXPECT_EQ(left + runner_->next_step(), 12);
    return absl::OkStatus();
  };
  EpochResult result;
  std::vector<PlannedStep> not_run;
  absl::Status s = runner_->Run(
      Steps(), 1, plan_, "epoch 1/1", &result, [] { return false; }, &not_run,
      &boundary);
  ASSERT_TRUE(s.ok()) << s;
  // Due before steps 4 and 8 (2 rounds of 2 in the lockstep modes), never
  // at the end: the epoch's own checkpoint is there.
  EXPECT_THAT(lefts, ElementsAre(8, 4));
  EXPECT_TRUE(not_run.empty());
  EXPECT_EQ(result.steps, 12);
  EXPECT_EQ(result.examples, 48);
  EXPECT_EQ(Ended(), 12);
}

TEST_P(StepRunnerBoundaryTest, AFailedCheckpointEndsTheRunWithItsError) {
  StepRunner::Boundary boundary;
  boundary.due = [&] { return runner_->next_step() >= 6; };
  boundary.take = [](int64_t, const EpochResult&) {
    return absl::UnavailableError("ps 1 lost its shards");
  };
  EpochResult result;
  absl::Status s = runner_->Run(
      Steps(), 1, plan_, "epoch 1/1", &result, [] { return false; }, nullptr,
      &boundary);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // No step after the boundary was handed out.
  EXPECT_EQ(Ended(), 6);
  EXPECT_EQ(runner_->next_step(), 6);
}

INSTANTIATE_TEST_SUITE_P(Modes, StepRunnerBoundaryTest,
                         ::testing::Values("async", "sync"));

}  // namespace
}  // namespace tessera
