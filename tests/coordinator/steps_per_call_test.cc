// CoordinatorOptions::steps_per_call: a worker's queued steps run several
// to a call, each still counted, re-run and failed on its own.

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/cluster_coordinator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/fake_worker.h"

namespace tessera {
namespace {

using ::tessera::coordinator_testing::CoordinatorFixture;
using ::tessera::coordinator_testing::GetWithin;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class StepsPerCallTest : public CoordinatorFixture {
 protected:
  // Schedules step 0 on worker 0 and waits until it runs, gated, so the
  // steps scheduled next queue up behind it; Open() lets it go.
  void HoldWorkerZeroInStepZero(std::vector<StepFuture>* futures) {
    workers_[0]->Gate(0);
    futures->push_back(MustSchedule(0, 0));
    ASSERT_TRUE(workers_[0]->WaitEntered());
  }
};

TEST_F(StepsPerCallTest, GroupsAWorkersOwnStepsInQueueOrder) {
  steps_per_call_ = 4;
  Start(1);
  // Worker 0 is held in step 0 while the rest is queued.
  std::vector<StepFuture> futures;
  ASSERT_NO_FATAL_FAILURE(HoldWorkerZeroInStepZero(&futures));
  for (int64_t s = 1; s < 10; ++s) futures.push_back(MustSchedule(s, 0));
  workers_[0]->Open();
  ASSERT_TRUE(JoinBounded().ok());
  // Step 9, alone, goes as a plain RunStep.
  EXPECT_THAT(workers_[0]->calls(),
              ElementsAre(ElementsAre(1, 2, 3, 4), ElementsAre(5, 6, 7, 8)));
  for (int64_t s = 0; s < 10; ++s) {
    absl::StatusOr<StepResponse> r = GetWithin(futures[s]);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FLOAT_EQ(r->loss(), 0.5f * s) << "step " << s;
  }
  EXPECT_EQ(coord_->steps_done(), 10);
  for (const auto& [step, n] : log_.Successes()) {
    EXPECT_EQ(n, 1) << "step " << step;
  }
}

TEST_F(StepsPerCallTest, AWorkerThatDiesMidCallReRunsOnlyTheUnfinishedSteps) {
  steps_per_call_ = 8;
  Start(1);
  std::vector<StepFuture> futures;
  ASSERT_NO_FATAL_FAILURE(HoldWorkerZeroInStepZero(&futures));
  // Steps 1-8 share a call; the worker dies in step 4 and comes back.
  workers_[0]->Fail(4, absl::UnavailableError("connection reset"),
                    /*die=*/true, /*dead_checks=*/1);
  for (int64_t s = 1; s < 9; ++s) futures.push_back(MustSchedule(s, 0));
  workers_[0]->Open();
  ASSERT_TRUE(JoinBounded().ok());
  for (const StepFuture& f : futures) ASSERT_TRUE(GetWithin(f).ok());
  // Steps 1-3 finished before the failure and ran once; 4 ran again; 5-8
  // never started before it.
  const std::map<int64_t, int> ok = log_.Successes();
  for (int64_t s = 0; s < 9; ++s) EXPECT_EQ(ok.at(s), 1) << "step " << s;
  int attempts_of_5 = 0;
  for (const auto& a : log_.attempts()) attempts_of_5 += a.step == 5;
  EXPECT_EQ(attempts_of_5, 1);
  EXPECT_EQ(coord_->steps_rerun(), 1);
  EXPECT_EQ(coord_->steps_done(), 9);
  EXPECT_EQ(workers_[0]->restores(), 1);
  const auto calls = workers_[0]->calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_THAT(calls[0], ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_THAT(calls[1], ElementsAre(4, 5, 6, 7, 8));
}

TEST_F(StepsPerCallTest, AnErrorMidCallFailsThatStepAndCancelsTheRest) {
  steps_per_call_ = 4;
  Start(1);
  std::vector<StepFuture> futures;
  ASSERT_NO_FATAL_FAILURE(HoldWorkerZeroInStepZero(&futures));
  workers_[0]->Fail(2, absl::InvalidArgumentError("wrong shape"),
                    /*die=*/false, /*dead_checks=*/-1);
  for (int64_t s = 1; s < 5; ++s) futures.push_back(MustSchedule(s, 0));
  workers_[0]->Open();
  absl::Status s = JoinBounded();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("wrong shape"));
  EXPECT_TRUE(GetWithin(futures[1]).ok());
  EXPECT_EQ(GetWithin(futures[2]).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (int64_t step : {3, 4}) {
    EXPECT_EQ(GetWithin(futures[step]).status().code(),
              absl::StatusCode::kCancelled)
        << "step " << step;
  }
  for (const auto& a : log_.attempts()) EXPECT_LE(a.step, 2);
}

TEST_F(StepsPerCallTest, ABoundedStalenessRunsOneStepPerCall) {
  steps_per_call_ = 4;
  max_staleness_ = 2;
  Start(1);
  for (int64_t s = 0; s < 6; ++s) MustSchedule(s, 0);
  ASSERT_TRUE(JoinBounded().ok());
  EXPECT_TRUE(workers_[0]->calls().empty());
  EXPECT_EQ(coord_->steps_done(), 6);
}

}  // namespace
}  // namespace tessera
