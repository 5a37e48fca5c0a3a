#include <atomic>
#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/cluster_coordinator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/fake_worker.h"

namespace tessera {
namespace {

using ::tessera::coordinator_testing::Attempt;
using ::tessera::coordinator_testing::CoordinatorFixture;
using ::tessera::coordinator_testing::GetWithin;
using ::tessera::coordinator_testing::Request;
using ::tessera::coordinator_testing::WaitReady;
using ::testing::HasSubstr;

class ClusterCoordinatorFailureTest : public CoordinatorFixture {};

TEST_F(ClusterCoordinatorFailureTest, DeadWorkersStepRerunsOnAnotherWorker) {
  Start(2);
  workers_[1]->Fail(100, absl::UnavailableError("connection reset"),
                    /*die=*/true, /*dead_checks=*/-1);
  for (int64_t s = 0; s < 4; ++s) MustSchedule(s, 0);
  StepFuture rerun = MustSchedule(100, 1);
  ASSERT_TRUE(JoinBounded().ok());
  absl::StatusOr<StepResponse> r = GetWithin(rerun);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ(r->loss(), 50.0f);
  EXPECT_EQ(r->correct(), 0);  // the fake puts its worker id here
  std::vector<Attempt> tries;
  for (const Attempt& a : log_.attempts()) {
    if (a.step == 100) tries.push_back(a);
  }
  ASSERT_EQ(tries.size(), 2u);
  EXPECT_EQ(tries[0].worker, 1);
  EXPECT_FALSE(tries[0].ok);
  EXPECT_EQ(tries[1].worker, 0);
  EXPECT_TRUE(tries[1].ok);
  EXPECT_EQ(tries[1].request, tries[0].request);
  EXPECT_EQ(tries[1].request, Request(100).SerializeAsString());
  EXPECT_EQ(coord_->steps_rerun(), 1);
  EXPECT_EQ(coord_->steps_done(), 5);
  workers_[1]->Revive();  // lets its recovery loop end
}

// A worker that dies after the queue was cancelled (here by an abort, as
// the heartbeat does when a parameter server fails) must not queue its step
// again: nothing would wait for it, and it would run after the recovery's
// restore with a gradient from before it.
TEST_F(ClusterCoordinatorFailureTest, DeadWorkersStepIsNotRequeuedAfterAbort) {
  Start(2);
  workers_[1]->Gate(100);
  workers_[1]->Fail(100, absl::UnavailableError("node lost"), /*die=*/true,
                    /*dead_checks=*/-1);
  StepFuture step = MustSchedule(100, 1);
  ASSERT_TRUE(workers_[1]->WaitEntered());
  coord_->Abort(absl::UnavailableError("ps 0 does not answer"));
  workers_[1]->Open();
  absl::StatusOr<StepResponse> r = GetWithin(step);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  absl::Status joined = JoinBounded();
  EXPECT_THAT(joined.message(), HasSubstr("ps 0 does not answer"));
  absl::SleepFor(absl::Milliseconds(200));  // worker 0 would take it now
  int attempts = 0;
  for (const Attempt& a : log_.attempts()) attempts += a.step == 100;
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(coord_->steps_rerun(), 0);
  workers_[1]->Revive();
}

TEST_F(ClusterCoordinatorFailureTest, NoStepLostOrDoubledWhenAWorkerDies) {
  Start(3);
  workers_[2]->Fail(7, absl::UnavailableError("gone"), /*die=*/true, -1);
  std::vector<StepFuture> futures;
  for (int64_t s = 0; s < 40; ++s) {
    // Only worker 2 takes step 7 (a backlog of 1 is not stolen).
    futures.push_back(MustSchedule(s, s == 7 ? 2 : -1));
  }
  ASSERT_TRUE(JoinBounded().ok());
  for (const StepFuture& f : futures) EXPECT_TRUE(GetWithin(f).ok());
  const std::map<int64_t, int> ok = log_.Successes();
  ASSERT_EQ(ok.size(), 40u);
  for (const auto& [step, n] : ok) EXPECT_EQ(n, 1) << "step " << step;
  EXPECT_EQ(log_.attempts().size(), 41u);
  bool dead = false;
  for (const Attempt& a : log_.attempts()) {
    if (a.worker != 2) continue;
    EXPECT_FALSE(dead) << "dead worker 2 ran step " << a.step;
    if (!a.ok) dead = true;
  }
  EXPECT_TRUE(dead);
  EXPECT_EQ(coord_->steps_rerun(), 1);
  EXPECT_EQ(coord_->steps_done(), 40);
  workers_[2]->Revive();
}

TEST_F(ClusterCoordinatorFailureTest, WorkerThatComesBackRerunsTheStep) {
  Start(1);
  // Dead for the check right after the failure, alive on the next one.
  workers_[0]->Fail(3, absl::UnavailableError("restarting"), /*die=*/true,
                    /*dead_checks=*/1);
  StepFuture f = MustSchedule(3, 0);
  ASSERT_TRUE(JoinBounded().ok());
  ASSERT_TRUE(GetWithin(f).ok());
  std::vector<Attempt> tries = log_.attempts();
  ASSERT_EQ(tries.size(), 2u);
  EXPECT_FALSE(tries[0].ok);
  EXPECT_TRUE(tries[1].ok);
  EXPECT_EQ(tries[1].request, tries[0].request);
  EXPECT_EQ(workers_[0]->restores(), 1);
  EXPECT_EQ(coord_->steps_rerun(), 1);
}

TEST_F(ClusterCoordinatorFailureTest, WorkerThatNeverComesBackFailsTheJob) {
  Start(1);
  workers_[0]->Fail(0, absl::UnavailableError("gone"), /*die=*/true, -1);
  StepFuture f = MustSchedule(0, -1);
  const absl::Status s = JoinBounded();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("worker 0"));
  EXPECT_EQ(GetWithin(f).status().code(), absl::StatusCode::kCancelled);
}

// A parameter server lost while a worker is being restarted (the chaos
// test's ssp2_idx seed 242156): Join returns the server's error while the
// worker is still down, so the recovery, which needs every worker, waits
// for it, through a Configure that failed once, instead of giving up.
TEST_F(ClusterCoordinatorFailureTest, RecoveryWaitsForAWorkerStillComingBack) {
  Start(1);
  workers_[0]->Fail(0, absl::UnavailableError("killed"), /*die=*/true, -1);
  workers_[0]->FailRestores(
      absl::CancelledError("worker 0 Configure: CANCELLED"), 1);
  StepFuture f = MustSchedule(0, 0);
  ASSERT_TRUE(WaitForEvent(0, MemberState::kDown));
  coord_->Abort(absl::UnavailableError("ps 1 holds 0 of its 4 shards"));
  EXPECT_THAT(JoinBounded().message(), HasSubstr("ps 1"));
  EXPECT_EQ(GetWithin(f).status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(coord_->worker_progress()[0].second);
  workers_[0]->Revive();
  EXPECT_TRUE(coord_->AwaitWorkersBack(coordinator_testing::kWait));
  EXPECT_FALSE(coord_->worker_progress()[0].second);
  EXPECT_EQ(workers_[0]->restores(), 2);
}

TEST_F(ClusterCoordinatorFailureTest,
       RecoveryStopsWaitingForAWorkerPastItsRecoveryTimeout) {
  Start(1);
  workers_[0]->Fail(0, absl::UnavailableError("killed"), /*die=*/true, -1);
  StepFuture f = MustSchedule(0, 0);
  ASSERT_TRUE(WaitForEvent(0, MemberState::kDown));
  coord_->Abort(absl::UnavailableError("ps 1 holds 0 of its 4 shards"));
  EXPECT_THAT(JoinBounded().message(), HasSubstr("ps 1"));
  // Not back within --worker_recovery_timeout (2 s here): its recovery
  // records the error, which ends the wait long before its own timeout.
  const absl::Time start = absl::Now();
  EXPECT_FALSE(coord_->AwaitWorkersBack(coordinator_testing::kWait));
  EXPECT_LT(absl::Now() - start, coordinator_testing::kWait);
  EXPECT_THAT(JoinBounded().message(), HasSubstr("did not come back"));
}

TEST_F(ClusterCoordinatorFailureTest, StepErrorOnLiveWorkerCancelsQueuedSteps) {
  Start(1);
  workers_[0]->Gate(0);
  workers_[0]->Fail(0, absl::InvalidArgumentError("bad batch"),
                    /*die=*/false, -1);
  std::vector<StepFuture> futures;
  for (int64_t s = 0; s < 5; ++s) futures.push_back(MustSchedule(s, -1));
  workers_[0]->Open();
  const absl::Status s = JoinBounded();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bad batch"));
  EXPECT_EQ(GetWithin(futures[0]).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (int64_t i = 1; i < 5; ++i) {
    EXPECT_EQ(GetWithin(futures[i]).status().code(),
              absl::StatusCode::kCancelled);
  }
  EXPECT_EQ(log_.attempts().size(), 1u);  // steps 1..4 never ran
  EXPECT_EQ(coord_->steps_rerun(), 0);

  // The error was reported once; the coordinator takes new steps again.
  StepFuture next = MustSchedule(9, -1);
  ASSERT_TRUE(JoinBounded().ok());
  EXPECT_TRUE(GetWithin(next).ok());
}

TEST_F(ClusterCoordinatorFailureTest, ScheduleReturnsPendingErrorOnce) {
  Start(1);
  workers_[0]->Gate(0);
  workers_[0]->Fail(0, absl::InvalidArgumentError("bad batch"), false, -1);
  MustSchedule(0, -1);
  StepFuture queued = MustSchedule(1, -1);
  workers_[0]->Open();
  // The queued step is cancelled once the error is recorded.
  ASSERT_TRUE(WaitReady(queued));
  absl::StatusOr<StepFuture> refused = coord_->Schedule(Request(2), -1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  StepFuture accepted = MustSchedule(3, -1);
  ASSERT_TRUE(JoinBounded().ok());
  EXPECT_TRUE(GetWithin(accepted).ok());
}

TEST_F(ClusterCoordinatorFailureTest,
       AbortCancelsQueuedStepsAfterInFlightOnes) {
  Start(1);
  workers_[0]->Gate(0);
  StepFuture running = MustSchedule(0, -1);
  StepFuture queued = MustSchedule(1, -1);
  ASSERT_TRUE(workers_[0]->WaitEntered());
  coord_->Abort(absl::UnavailableError("ps 1 stopped answering"));
  ASSERT_TRUE(WaitReady(queued));
  EXPECT_EQ(GetWithin(queued).status().code(), absl::StatusCode::kCancelled);
  workers_[0]->Open();
  const absl::Status s = JoinBounded();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("ps 1"));
  // The step in flight finished normally; only the queued one was dropped.
  EXPECT_TRUE(GetWithin(running).ok());
  EXPECT_EQ(log_.attempts().size(), 1u);
  // A second abort while one is pending keeps the first error.
  coord_->Abort(absl::InternalError("first"));
  coord_->Abort(absl::InternalError("second"));
  EXPECT_THAT(JoinBounded().message(), HasSubstr("first"));
  StepFuture next = MustSchedule(2, -1);
  ASSERT_TRUE(JoinBounded().ok());
  EXPECT_TRUE(GetWithin(next).ok());
}

// A worker cut off from a parameter server (a network partition) fails
// its step with UNAVAILABLE but still answers: the step runs again, the
// same examples, once the path heals, and the job goes on.
TEST_F(ClusterCoordinatorFailureTest, StepThatCouldNotReachAServerRunsAgain) {
  Start(1);
  workers_[0]->FailRepeatedly(
      7, absl::UnavailableError("ps 1 PullDense: Connection timed out"), 2);
  workers_[0]->FailRepeatedly(
      8, absl::DeadlineExceededError("ps 0 PushDense: deadline"), 1);
  StepFuture seven = MustSchedule(7, -1);
  StepFuture eight = MustSchedule(8, -1);
  ASSERT_TRUE(JoinBounded().ok());
  ASSERT_TRUE(GetWithin(seven).ok());
  ASSERT_TRUE(GetWithin(eight).ok());
  EXPECT_EQ(coord_->steps_rerun(), 3);
  EXPECT_EQ(coord_->steps_done(), 2);
  std::map<int64_t, int> successes = log_.Successes();
  EXPECT_EQ(successes[7], 1);
  EXPECT_EQ(successes[8], 1);
  for (const Attempt& a : log_.attempts()) {
    EXPECT_EQ(a.request, Request(a.step).SerializeAsString());
  }
}

TEST_F(ClusterCoordinatorFailureTest, StepThatNeverReachesAServerFailsTheJob) {
  Start(1, 8, absl::Milliseconds(300));
  workers_[0]->FailRepeatedly(
      3, absl::UnavailableError("ps 1 PullDense: Connection timed out"), -1);
  StepFuture f = MustSchedule(3, -1);
  const absl::Status s = JoinBounded();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("ps 1"));
  EXPECT_EQ(GetWithin(f).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_GE(log_.attempts().size(), 2u);
  for (const Attempt& a : log_.attempts()) EXPECT_FALSE(a.ok);
}

// The heartbeat's Abort (a server that really died) ends the retries at
// once, so that the recovery's Join does not wait for them.
TEST_F(ClusterCoordinatorFailureTest, AbortEndsTheRetriesOfAStep) {
  Start(1, 8, absl::Seconds(60));
  workers_[0]->FailRepeatedly(3, absl::UnavailableError("ps 1 down"), -1);
  StepFuture f = MustSchedule(3, -1);
  ASSERT_TRUE(log_.WaitForAttempts(2));
  coord_->Abort(absl::UnavailableError("heartbeat: ps 1 does not answer"));
  const absl::Status s = JoinBounded();
  EXPECT_THAT(s.message(), HasSubstr("heartbeat"));
  EXPECT_EQ(GetWithin(f).status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace tessera
