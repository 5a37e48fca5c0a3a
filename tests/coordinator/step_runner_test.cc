// StepRunner's lockstep rounds when a replica's worker dies inside one:
// with a repair the round runs again under its step ids; without one, or
// when a part of it completed somewhere, the epoch ends with the error.

#include "coordinator/step_runner.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/byte_codec.h"
#include "common/training_mode.h"
#include "coordinator/control/job_status_board.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/replica_repair.h"
#include "coordinator/step_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/fake_worker.h"
#include "tests/written_text.h"

namespace tessera {
namespace {

using ::tessera::coordinator_testing::Attempt;
using ::tessera::coordinator_testing::CoordinatorFixture;
using ::tessera::coordinator_testing::FakeWorker;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Steps whose requests carry their example ids.
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

class StepRunnerRepairTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    replicas_in_lockstep_ = true;
    // As TrainingJob sets it for replicas: nobody takes another's part.
    Start(2, std::numeric_limits<int>::max());
    StepRunnerOptions options;
    options.mode = *ParseTrainingMode("mirrored");
    options.num_workers = 2;
    out_ = std::tmpfile();
    runner_ = std::make_unique<StepRunner>(coord_.get(), options, &board_,
                                           nullptr, out_);
  }

  // Three rounds of a part per worker, 8 examples each: step ids 0-5,
  // round r holds 2r and 2r + 1.
  static std::vector<PlannedStep> Steps() {
    std::vector<PlannedStep> steps(6);
    for (int i = 0; i < 6; ++i) {
      steps[i].shard = i % 2;
      for (int k = 0; k < 8; ++k) steps[i].example_ids.push_back(8 * i + k);
    }
    return steps;
  }

  void TearDown() override {
    if (opener_.joinable()) opener_.join();
    std::fclose(out_);
  }

  // Worker 1 dies in step 3 (round 1) and comes back after one probe;
  // worker 0's part of that round fails as the chief's interrupt makes it
  // fail, unless `survivor_completes`. As in a real round, both parts have
  // started (so round 0 is over everywhere) before either ends.
  void KillWorker1InRound1(bool survivor_completes) {
    workers_[1]->Fail(3, absl::UnavailableError("killed"), /*die=*/true,
                      /*dead_checks=*/1);
    if (!survivor_completes) {
      workers_[0]->FailRepeatedly(
          2, absl::AbortedError("the chief interrupted the all-reduce"), 1);
    }
    OpenRound1Together();
  }
  void OpenRound1Together() {
    workers_[0]->Gate(2);
    workers_[1]->Gate(3);
    opener_ = std::thread([this] {
      EXPECT_TRUE(workers_[0]->WaitEntered());
      EXPECT_TRUE(workers_[1]->WaitEntered());
      workers_[0]->Open();
      workers_[1]->Open();
    });
  }

  std::string Out() { return WrittenText(out_); }

  std::thread opener_;
  JobStatusBoard board_;
  std::FILE* out_ = nullptr;
  IdPlan plan_;
  std::unique_ptr<StepRunner> runner_;
};

TEST_F(StepRunnerRepairTest, TheRoundRunsAgainUnderItsStepIds) {
  KillWorker1InRound1(/*survivor_completes=*/false);
  std::vector<int64_t> repaired;
  std::vector<int> restarted;
  runner_->SetRoundRepair([&](int64_t global_step, const absl::Status& error) {
    repaired.push_back(global_step);
    restarted = coord_->replica_losses()->restarted();
    EXPECT_THAT(error.message(), HasSubstr("failed on worker"));
    coord_->replica_losses()->Take();
    return absl::OkStatus();
  });
  EpochResult result;
  absl::Status s = runner_->Run(Steps(), 1, plan_, "epoch 1/1", &result);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(repaired, ElementsAre(1));
  EXPECT_THAT(restarted, ElementsAre(1));
  // Every step completed once, the re-run ones with the same examples.
  std::map<int64_t, int> successes = log_.Successes();
  for (int64_t step = 0; step < 6; ++step) {
    EXPECT_EQ(successes[step], 1) << "step " << step;
  }
  std::vector<std::string> requests_of_3;
  std::vector<int64_t> global_steps_of_3;
  for (const Attempt& a : log_.attempts()) {
    if (a.step != 3) continue;
    StepRequest request;
    ASSERT_TRUE(request.ParseFromString(a.request));
    global_steps_of_3.push_back(request.sync_step());
    request.clear_sync_step();
    requests_of_3.push_back(request.SerializeAsString());
  }
  ASSERT_EQ(requests_of_3.size(), 2u);
  EXPECT_EQ(requests_of_3[0], requests_of_3[1]);
  // The same global step: a server that holds every part of the first
  // try counts the second's as duplicates.
  EXPECT_THAT(global_steps_of_3, ElementsAre(1, 1));
  EXPECT_EQ(result.steps, 6);
  EXPECT_EQ(result.examples, 48);
  EXPECT_EQ(runner_->next_step(), 6);
  // Round 1 ran again, and round 2 too when it was scheduled before the
  // failure showed: two parts per round.
  EXPECT_THAT(coord_->steps_rerun(), ::testing::AnyOf(2, 4));
  EXPECT_EQ(runner_->next_global_step(), 3);
}

// Elastic mirrored (#48 item 5): a worker that joins gets its place in
// the ring at the next round boundary, with none in flight; from then on a
// round has a part per member, the newcomer's on its own queue, and every
// step still runs once.
TEST_F(StepRunnerRepairTest, AJoinReformsTheRingAtARoundBoundary) {
  auto* joiner = new FakeWorker(2, &log_);
  absl::StatusOr<int> seat =
      coord_->AddSeat(std::unique_ptr<WorkerStub>(joiner));
  ASSERT_TRUE(seat.ok()) << seat.status();
  ASSERT_EQ(*seat, 2);
  EXPECT_FALSE(coord_->ring_changed());
  ASSERT_TRUE(coord_->Serve(2, 0).ok());
  EXPECT_TRUE(coord_->ring_changed());
  std::vector<std::vector<int>> rings;
  std::vector<int64_t> at;
  runner_->SetRingReform([&](const std::vector<int>& ring, int64_t step) {
    rings.push_back(ring);
    at.push_back(step);
    return absl::OkStatus();
  });
  EpochResult result;
  absl::Status s = runner_->Run(Steps(), 1, plan_, "epoch 1/1", &result);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_THAT(rings, ElementsAre(ElementsAre(0, 1, 2)));
  EXPECT_THAT(at, ElementsAre(0));
  EXPECT_FALSE(coord_->ring_changed());
  std::map<int64_t, int> successes = log_.Successes();
  for (int64_t step = 0; step < 6; ++step) {
    EXPECT_EQ(successes[step], 1) << "step " << step;
  }
  // Two rounds of three parts, one per member: the newcomer took one
  // part of each.
  std::map<int, int> per_worker;
  for (const Attempt& a : log_.attempts()) per_worker[a.worker] += a.ok;
  EXPECT_EQ(per_worker[0], 2);
  EXPECT_EQ(per_worker[1], 2);
  EXPECT_EQ(per_worker[2], 2);
  EXPECT_EQ(runner_->next_global_step(), 2);
  EXPECT_EQ(result.examples, 48);
}

TEST_F(StepRunnerRepairTest, AFailedReformEndsTheEpoch) {
  ASSERT_TRUE(coord_->AddSeat(std::make_unique<FakeWorker>(2, &log_)).ok());
  ASSERT_TRUE(coord_->Serve(2, 0).ok());
  runner_->SetRingReform([&](const std::vector<int>&, int64_t) {
    return absl::UnavailableError("worker 0 could not save its replica");
  });
  EpochResult result;
  absl::Status s = runner_->Run(Steps(), 1, plan_, "epoch 1/1", &result);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("could not save its replica"));
}

TEST_F(StepRunnerRepairTest, ARefusedRepairEndsTheEpochNamingWhy) {
  KillWorker1InRound1(/*survivor_completes=*/false);
  runner_->SetRoundRepair([](int64_t, const absl::Status&) {
    return absl::FailedPreconditionError("a parameter server failed too");
  });
  EpochResult result;
  absl::Status s = runner_->Run(Steps(), 1, plan_, "epoch 1/1", &result);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("failed on worker"));
  EXPECT_THAT(Out(), HasSubstr("global step 1 cannot run again (a parameter "
                               "server failed too)"));
  EXPECT_EQ(log_.Successes()[4], 0);  // round 2 never ran
}

// hybrid:ssp: the refusal says the restarted worker's row pushes were
// lost, and the epoch's error too, for PsRecovery's bound.
TEST_F(StepRunnerRepairTest, ARefusalForLostRowPushesIsTheEpochsError) {
  KillWorker1InRound1(/*survivor_completes=*/false);
  runner_->SetRoundRepair([](int64_t, const absl::Status&) {
    return RowPushesLostError(
        "worker 1 restarted with up to 2 of its row "
        "pushes in flight");
  });
  EpochResult result;
  absl::Status s = runner_->Run(Steps(), 1, plan_, "epoch 1/1", &result);
  EXPECT_TRUE(RowPushesLost(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker 1 restarted with up to 2"));
  EXPECT_THAT(s.message(), HasSubstr("failed on worker"));
}

TEST_F(StepRunnerRepairTest, ARoundAReplicaAppliedIsNotRunAgain) {
  KillWorker1InRound1(/*survivor_completes=*/true);
  int repairs = 0;
  runner_->SetRoundRepair([&](int64_t, const absl::Status&) {
    ++repairs;
    return absl::OkStatus();
  });
  EpochResult result;
  absl::Status s = runner_->Run(Steps(), 1, plan_, "epoch 1/1", &result);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(repairs, 0);
}

TEST_F(StepRunnerRepairTest, ARoundThatKeepsFailingIsGivenUp) {
  // Worker 0 fails step 2 every time, dying each time: a repair cannot
  // help a round that cannot run.
  int repairs = 0;
  runner_->SetRoundRepair([&](int64_t, const absl::Status&) {
    ++repairs;
    workers_[0]->Fail(2, absl::UnavailableError("killed again"), true, 1);
    coord_->replica_losses()->Take();
    return absl::OkStatus();
  });
  workers_[0]->Fail(2, absl::UnavailableError("killed"), true, 1);
  workers_[1]->FailRepeatedly(3, absl::AbortedError("interrupted"), -1);
  OpenRound1Together();
  EpochResult result;
  absl::Status s = runner_->Run(Steps(), 1, plan_, "epoch 1/1", &result);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(repairs, 3);
}

}  // namespace
}  // namespace tessera
