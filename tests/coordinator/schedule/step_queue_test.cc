// StepQueue alone: which worker takes which step, stealing, the staleness
// gate and hand-overs, with no threads.

#include "coordinator/schedule/step_queue.h"

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "coordinator/membership/member_state.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

class StepQueueTest : public ::testing::Test {
 protected:
  void Make(int queues, int steal_threshold = 8, int64_t staleness = -1) {
    StepQueue::Options options;
    options.steal_threshold = steal_threshold;
    options.max_staleness = staleness;
    queue_ = std::make_unique<StepQueue>(
        queues, options, [this](int worker) { woken_.push_back(worker); });
  }
  void Add(int step, int queue, bool front = false) {
    QueuedStep s;
    s.request.set_step(step);
    s.queue = queue;
    queue_->Enqueue(std::move(s), front);
  }
  std::vector<int64_t> TakeSteps(int worker, int max_steps = 1) {
    std::vector<QueuedStep> out;
    queue_->Take(worker, max_steps, &out);
    std::vector<int64_t> steps;
    for (const QueuedStep& s : out) steps.push_back(s.request.step());
    return steps;
  }
  // A worker that takes one step and finishes it.
  void RunOne(int worker) {
    ASSERT_TRUE(queue_->HasWork(worker));
    TakeSteps(worker);
    queue_->Finish(worker);
    queue_->SetBusy(worker, false);
  }

  std::unique_ptr<StepQueue> queue_;
  std::vector<int> woken_;
};

TEST_F(StepQueueTest, OwnStepsInOrderWithUnassignedOnesAndRetriesFirst) {
  Make(2);
  Add(1, 0);
  Add(2, -1);
  Add(3, 0);
  Add(4, 1);
  Add(0, 0, /*front=*/true);
  EXPECT_EQ(queue_->size(), 5);
  EXPECT_EQ(TakeSteps(0, /*max_steps=*/8), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(queue_->size(), 1);
  EXPECT_FALSE(queue_->HasOwn(0));
  EXPECT_TRUE(queue_->HasOwn(1));
  EXPECT_EQ(queue_->PopOwn(1).request.step(), 4);
}

TEST_F(StepQueueTest, WakesTheServersOfAQueueOrEveryoneForUnassigned) {
  Make(3);
  Add(1, 2);
  EXPECT_EQ(woken_, (std::vector<int>{2}));
  woken_.clear();
  Add(2, -1);
  EXPECT_EQ(woken_, (std::vector<int>{StepQueue::kEveryWorker}));
}

TEST_F(StepQueueTest, StealsOnlyABacklogOrADownWorkersQueue) {
  Make(2, /*steal_threshold=*/3);
  Add(1, 0);
  Add(2, 0);
  EXPECT_FALSE(queue_->Stealable(0));
  EXPECT_FALSE(queue_->HasWork(1));
  woken_.clear();
  Add(3, 0);  // a backlog of 3
  EXPECT_TRUE(queue_->Stealable(0));
  EXPECT_TRUE(queue_->HasWork(1));
  EXPECT_EQ(woken_.back(), StepQueue::kEveryWorker);
  EXPECT_EQ(TakeSteps(1, /*max_steps=*/8), (std::vector<int64_t>{1}));
  EXPECT_FALSE(queue_->Stealable(0));  // 2 left
  EXPECT_FALSE(queue_->HasWork(1));

  queue_->SetDown(0, true);
  EXPECT_TRUE(queue_->Stealable(0));
  EXPECT_FALSE(queue_->HasWork(0));
  EXPECT_TRUE(queue_->HasWork(1));
  queue_->SetDown(0, false);
  EXPECT_FALSE(queue_->Stealable(0));
}

TEST_F(StepQueueTest, StealsTheOldestStealableStep) {
  Make(3, /*steal_threshold=*/1);
  Add(1, 1);
  Add(2, 0);
  Add(3, 1);
  EXPECT_EQ(TakeSteps(2, /*max_steps=*/8), (std::vector<int64_t>{1}));
  EXPECT_EQ(TakeSteps(2, /*max_steps=*/8), (std::vector<int64_t>{2}));
}

TEST_F(StepQueueTest, StalenessBoundHoldsAWorkerThatIsAheadOfABusyOne) {
  Make(2, /*steal_threshold=*/8, /*staleness=*/1);
  for (int i = 0; i < 4; ++i) Add(i, 0);
  Add(10, 1);
  EXPECT_EQ(TakeSteps(1), (std::vector<int64_t>{10}));  // busy, 0 finished
  RunOne(0);
  EXPECT_EQ(queue_->Lead(0), 1);
  RunOne(0);  // it had a lead of 1 when it took this step
  EXPECT_EQ(queue_->max_lead(), 1);
  EXPECT_EQ(queue_->Lead(0), 2);
  EXPECT_FALSE(queue_->HasWork(0));
  EXPECT_EQ(queue_->Slowest(), 0);
  queue_->Finish(1);
  EXPECT_EQ(queue_->Slowest(), 1);
  EXPECT_TRUE(queue_->HasWork(0));
  // Idle with nothing queued, worker 1 no longer holds anyone back.
  queue_->SetBusy(1, false);
  EXPECT_EQ(queue_->Slowest(), 2);
  EXPECT_EQ(queue_->Slowest(/*except=*/0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(queue_->Lead(0), 0);
}

TEST_F(StepQueueTest, StalenessBoundTakesOneStepAtATime) {
  Make(1, /*steal_threshold=*/8, /*staleness=*/2);
  for (int i = 0; i < 4; ++i) Add(i, 0);
  EXPECT_EQ(TakeSteps(0, /*max_steps=*/8), (std::vector<int64_t>{0}));
}

TEST_F(StepQueueTest, ADownWorkerDoesNotHoldTheOthersBack) {
  Make(2, /*steal_threshold=*/8, /*staleness=*/0);
  Add(1, 0);
  Add(2, 1);
  RunOne(0);
  Add(3, 0);
  EXPECT_FALSE(queue_->HasWork(0));  // worker 1 has a step queued
  queue_->SetDown(1, true);
  EXPECT_TRUE(queue_->HasWork(0));
}

TEST_F(StepQueueTest, AnyDownCountsOnlyWorkersThatHaveNotLeft) {
  Make(3);
  EXPECT_FALSE(queue_->AnyDown());
  queue_->SetDown(1, true);
  EXPECT_TRUE(queue_->AnyDown());
  // Removed while down: no recovery waits for it any more.
  queue_->Leave(1, MemberState::kRemoved);
  EXPECT_FALSE(queue_->AnyDown());
  queue_->SetDown(2, true);
  EXPECT_TRUE(queue_->AnyDown());
  queue_->SetDown(2, false);
  EXPECT_FALSE(queue_->AnyDown());
}

TEST_F(StepQueueTest, LeavingHandsTheQueuesToTheActiveWorkerServingFewest) {
  Make(3);
  const std::vector<StepQueue::Handover> first =
      queue_->Leave(0, MemberState::kDraining);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].queue, 0);
  EXPECT_EQ(first[0].to, 1);
  EXPECT_EQ(queue_->state(0), MemberState::kDraining);
  EXPECT_EQ(queue_->ActiveWorkers(), 2);
  const std::vector<StepQueue::Handover> second =
      queue_->Leave(1, MemberState::kRemoved);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].to, 2);
  EXPECT_EQ(second[1].to, 2);
  Add(7, 0);
  EXPECT_TRUE(queue_->HasOwn(2));
  EXPECT_FALSE(queue_->HasWork(0));  // draining: takes no more
}

TEST_F(StepQueueTest, ANewcomerServesTheLeastServedQueueLevelWithTheSlowest) {
  Make(2, /*steal_threshold=*/8, /*staleness=*/1);
  Add(1, 0);
  Add(2, 0);
  Add(3, 1);
  RunOne(0);
  RunOne(0);
  RunOne(1);
  EXPECT_EQ(queue_->QueueForNewWorker(), 0);  // a tie: the lowest index
  const int w = queue_->AddWorker();
  EXPECT_EQ(w, 2);
  EXPECT_EQ(queue_->state(w), MemberState::kJoining);
  EXPECT_FALSE(queue_->HasWork(w));
  woken_.clear();
  queue_->Activate(w, 1);
  EXPECT_EQ(woken_, (std::vector<int>{w}));
  EXPECT_EQ(queue_->state(w), MemberState::kActive);
  EXPECT_EQ(queue_->progress(w), 0);  // credited with the slowest's 1
  EXPECT_EQ(queue_->QueueForNewWorker(), 0);
  Add(4, 1);
  EXPECT_TRUE(queue_->HasOwn(w));
}

TEST_F(StepQueueTest, ClearRemovesEveryStepAndStealing) {
  Make(2, /*steal_threshold=*/1);
  Add(1, 0);
  Add(2, -1);
  Add(3, 1);
  const std::vector<QueuedStep> steps = queue_->Clear();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].request.step(), 1);
  EXPECT_EQ(steps[1].request.step(), 3);
  EXPECT_EQ(steps[2].request.step(), 2);
  EXPECT_EQ(queue_->size(), 0);
  EXPECT_FALSE(queue_->HasWork(0));
  EXPECT_FALSE(queue_->HasWork(1));
}

TEST_F(StepQueueTest, WakeFreedWakesOnlyTheWorkersTheSlowestLetsGoOn) {
  Make(4, /*steal_threshold=*/8, /*staleness=*/1);
  for (int w = 0; w < 4; ++w) {
    for (int i = 0; i < 3; ++i) Add(10 * w + i, w);
  }
  EXPECT_EQ(TakeSteps(3), (std::vector<int64_t>{30}));  // busy at 0
  for (int w = 0; w < 2; ++w) {
    RunOne(w);
    RunOne(w);
    EXPECT_FALSE(queue_->HasWork(w));  // 2 ahead of worker 3
  }
  RunOne(2);  // 1 ahead: not held back
  woken_.clear();
  queue_->WakeFreed();
  EXPECT_TRUE(woken_.empty());  // the slowest did not move
  queue_->Finish(3);
  queue_->WakeFreed();
  EXPECT_EQ(woken_, (std::vector<int>{0, 1}));
  EXPECT_TRUE(queue_->HasWork(0));
  EXPECT_TRUE(queue_->HasWork(1));
  woken_.clear();
  queue_->WakeFreed();
  EXPECT_TRUE(woken_.empty());
}

// The running minimum against the definition, recomputed from scratch
// after each of a random run of operations.
TEST_F(StepQueueTest, SlowestIsTheMinimumOverTheWorkersThatHoldOthersBack) {
  constexpr int kWorkers = 6;
  Make(kWorkers, /*steal_threshold=*/3, /*staleness=*/2);
  std::vector<int64_t> finished(kWorkers, 0);
  std::vector<bool> busy(kWorkers, false), down(kWorkers, false);
  std::vector<int> queued(kWorkers, 0);  // per queue
  int unassigned = 0;
  std::mt19937 rng(47);
  for (int op = 0; op < 5000; ++op) {
    const int w = static_cast<int>(rng() % kWorkers);
    switch (rng() % 5) {
      case 0: {
        const int q = static_cast<int>(rng() % (kWorkers + 1)) - 1;
        Add(op, q);
        ++(q < 0 ? unassigned : queued[q]);
        break;
      }
      case 1:
        if (!busy[w] && queue_->HasWork(w)) {
          std::vector<QueuedStep> out;
          queue_->Take(w, 1, &out);
          for (const QueuedStep& s : out) {
            --(s.queue < 0 ? unassigned : queued[s.queue]);
          }
          busy[w] = true;
        }
        break;
      case 2:
        if (busy[w]) {
          queue_->Finish(w);
          ++finished[w];
          queue_->SetBusy(w, false);
          busy[w] = false;
        }
        break;
      case 3:
        down[w] = !down[w];
        queue_->SetDown(w, down[w]);
        break;
      default:
        if (rng() % 50 == 0) {
          queue_->Clear();
          std::fill(queued.begin(), queued.end(), 0);
          unassigned = 0;
        }
    }
    for (int except = -1; except < kWorkers; ++except) {
      int64_t want = std::numeric_limits<int64_t>::max();
      for (int x = 0; x < kWorkers; ++x) {
        if (x == except || down[x]) continue;
        if (busy[x] || unassigned > 0 || queued[x] > 0) {
          want = std::min(want, finished[x]);
        }
      }
      ASSERT_EQ(queue_->Slowest(except), want) << "op " << op;
    }
  }
}

}  // namespace
}  // namespace tessera
