// Workers that join, drain and are removed while steps run: every step
// still runs to completion exactly once, with the request it was
// scheduled with, and a worker that leaves hands its shard's steps over.

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/membership/membership.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/fake_worker.h"
#include "tests/coordinator/membership/fake_seats.h"

namespace tessera {
namespace {

using ::tessera::coordinator_testing::Attempt;
using ::tessera::coordinator_testing::CoordinatorFixture;
using ::tessera::coordinator_testing::FakeWorker;
using ::tessera::coordinator_testing::GetWithin;
using ::tessera::coordinator_testing::Request;
using ::tessera::membership_testing::AddressOnly;
using ::testing::HasSubstr;

class ClusterCoordinatorMembershipTest : public CoordinatorFixture {
 protected:
  // Every step of [0, n) succeeded exactly once, with its own request.
  void ExpectEachStepOnce(int64_t n) {
    std::map<int64_t, int> successes = log_.Successes();
    for (int64_t step = 0; step < n; ++step) {
      EXPECT_EQ(successes[step], 1) << "step " << step;
    }
    for (const Attempt& a : log_.attempts()) {
      EXPECT_EQ(a.request, Request(a.step).SerializeAsString());
    }
  }
  // The workers that ran step `step` successfully.
  std::set<int> RanOn(int64_t step) {
    std::set<int> out;
    for (const Attempt& a : log_.attempts()) {
      if (a.step == step && a.ok) out.insert(a.worker);
    }
    return out;
  }
};

TEST_F(ClusterCoordinatorMembershipTest, JoinedWorkerTakesTheShardItServes) {
  Start(1);
  // Worker 0 is held in its first step, so only the newcomer can run the
  // rest of shard 0's steps.
  workers_[0]->Gate(0);
  std::vector<StepFuture> futures;
  for (int64_t step = 0; step < 10; ++step) {
    futures.push_back(MustSchedule(step, 0));
  }
  ASSERT_TRUE(workers_[0]->WaitEntered());
  auto* joiner = new FakeWorker(1, &log_);
  absl::StatusOr<int> w = coord_->AddSeat(std::unique_ptr<WorkerStub>(joiner));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*w, 1);
  EXPECT_EQ(coord_->QueueForNewWorker(), 0);
  ASSERT_TRUE(coord_->Serve(*w, 0).ok());
  ASSERT_TRUE(log_.WaitForAttempts(9));  // the newcomer's nine
  workers_[0]->Open();
  ASSERT_TRUE(JoinBounded().ok());
  ExpectEachStepOnce(10);
  for (int64_t step = 1; step < 10; ++step) {
    EXPECT_EQ(RanOn(step), std::set<int>{1}) << "step " << step;
  }
  EXPECT_EQ(coord_->num_workers(), 2);
}

TEST_F(ClusterCoordinatorMembershipTest, JoiningWorkerTakesNoStepUntilActive) {
  Start(1);
  auto* joiner = new FakeWorker(1, &log_);
  absl::StatusOr<int> w = coord_->AddSeat(std::unique_ptr<WorkerStub>(joiner));
  ASSERT_TRUE(w.ok());
  for (int64_t step = 0; step < 6; ++step) MustSchedule(step, -1);
  ASSERT_TRUE(JoinBounded().ok());
  ExpectEachStepOnce(6);
  for (int64_t step = 0; step < 6; ++step) {
    EXPECT_EQ(RanOn(step), std::set<int>{0});
  }
  ASSERT_TRUE(coord_->Leave(*w, MemberState::kRemoved).ok());
  // Forgotten: left for good.
  EXPECT_EQ(coord_->Leave(*w, MemberState::kRemoved).code(),
            absl::StatusCode::kFailedPrecondition);
}

// A job recovering from an error (its steps cancelled until Join takes
// it) lets a worker join once it has recovered.
TEST_F(ClusterCoordinatorMembershipTest, JoinWaitsForTheJobToRecover) {
  Start(1);
  coord_->Abort(absl::UnavailableError("a parameter server failed"));
  absl::StatusOr<int> w =
      coord_->AddSeat(std::make_unique<FakeWorker>(1, &log_));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(coord_->Serve(*w, 0).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(JoinBounded().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(coord_->Serve(*w, 0).ok());
  for (int64_t step = 0; step < 4; ++step) MustSchedule(step, 0);
  ASSERT_TRUE(JoinBounded().ok());
  ExpectEachStepOnce(4);
}

TEST_F(ClusterCoordinatorMembershipTest,
       DrainedWorkerFinishesItsStepAndHandsItsShardOver) {
  // No stealing: shard 1's steps reach worker 0 only by the hand-over.
  Start(2, /*steal_threshold=*/1000);
  workers_[1]->Gate(1);
  std::vector<StepFuture> futures;
  for (int64_t step = 0; step < 20; ++step) {
    futures.push_back(MustSchedule(step, static_cast<int>(step % 2)));
  }
  ASSERT_TRUE(workers_[1]->WaitEntered());
  ASSERT_TRUE(coord_->Leave(1, MemberState::kDraining).ok());
  const absl::Status again = coord_->Leave(1, MemberState::kDraining);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("already draining"));
  workers_[1]->Open();
  ASSERT_TRUE(JoinBounded().ok());
  ExpectEachStepOnce(20);
  // The step it held, it finished; shard 1's others ran on worker 0.
  EXPECT_EQ(RanOn(1), std::set<int>{1});
  for (int64_t step = 3; step < 20; step += 2) {
    EXPECT_EQ(RanOn(step), std::set<int>{0}) << "step " << step;
  }
  EXPECT_TRUE(WaitForEvent(1, MemberState::kDrained));
  // Drained: a step for its shard still runs, on the other worker.
  StepFuture late = MustSchedule(21, 1);
  ASSERT_TRUE(JoinBounded().ok());
  ASSERT_TRUE(GetWithin(late).ok());
  EXPECT_EQ(RanOn(21), std::set<int>{0});
}

// An idle worker drains at once: with the membership told of what the
// coordinator sees, its kDrained still comes after the drain, so the
// membership ends with it drained.
TEST_F(ClusterCoordinatorMembershipTest, IdleWorkerDrainsAfterItsDrainBegan) {
  AddressOnly a("h:1"), b("h:2");
  std::unique_ptr<Membership> membership;
  tell_also_ = [&](int worker, MemberState state, const std::string& note) {
    membership->Set(worker, state, note);
  };
  Start(2);
  membership = std::make_unique<Membership>(std::vector<WorkerTask*>{&a, &b},
                                            coord_.get(), /*min_workers=*/1);
  ASSERT_TRUE(membership->Drain(1).ok());
  ASSERT_TRUE(WaitForEvent(1, MemberState::kDrained));
  EXPECT_EQ(membership->state(1), MemberState::kDrained);
  JobStatus status;
  membership->Fill(&status);
  ASSERT_EQ(status.membership_size(), 4);
  EXPECT_EQ(status.membership(2).state(), "draining");
  EXPECT_EQ(status.membership(3).state(), "drained");
  // Its shard's steps run on the other worker.
  StepFuture f = MustSchedule(0, 1);
  ASSERT_TRUE(JoinBounded().ok());
  EXPECT_EQ(RanOn(0), std::set<int>{0});
  coord_.reset();  // its threads tell `membership`
}

TEST_F(ClusterCoordinatorMembershipTest,
       LostWorkerIsRemovedAndItsStepsRunElsewhere) {
  remove_lost_workers_ = true;
  Start(2, /*steal_threshold=*/1000);
  // Worker 1 dies in step 1 and never answers again.
  workers_[1]->Fail(1, absl::UnavailableError("killed"), /*die=*/true, -1);
  std::vector<StepFuture> futures;
  for (int64_t step = 0; step < 20; ++step) {
    futures.push_back(MustSchedule(step, static_cast<int>(step % 2)));
  }
  ASSERT_TRUE(JoinBounded().ok());
  ExpectEachStepOnce(20);
  EXPECT_EQ(RanOn(1), std::set<int>{0});
  EXPECT_TRUE(WaitForEvent(1, MemberState::kRemoved));
  // Removed: its shard's later steps go to worker 0 without a wait.
  StepFuture late = MustSchedule(21, 1);
  ASSERT_TRUE(JoinBounded().ok());
  EXPECT_EQ(RanOn(21), std::set<int>{0});
}

TEST_F(ClusterCoordinatorMembershipTest, LastWorkerLostFailsTheJobClearly) {
  remove_lost_workers_ = true;
  Start(1);
  workers_[0]->Fail(0, absl::UnavailableError("killed"), /*die=*/true, -1);
  StepFuture f = MustSchedule(0, 0);
  const absl::Status s = JoinBounded();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("0 worker(s) left"));
  EXPECT_EQ(GetWithin(f).status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace tessera
