// ssp:S in the coordinator: a worker starts its step c only when every
// worker with work left has finished c - S steps.

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "coordinator/cluster_coordinator.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

// Finished-step counts of all workers, and the largest lead any worker had
// over another when it started a step, as the workers themselves saw it.
class Clocks {
 public:
  explicit Clocks(int n) : finished_(n, 0) {}
  void Start(int worker) {
    absl::MutexLock lock(&mu_);
    const int64_t slowest =
        *std::min_element(finished_.begin(), finished_.end());
    observed_lead_ = std::max(observed_lead_, finished_[worker] - slowest);
  }
  void Finish(int worker) {
    absl::MutexLock lock(&mu_);
    ++finished_[worker];
  }
  int64_t observed_lead() const {
    absl::MutexLock lock(&mu_);
    return observed_lead_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<int64_t> finished_ ABSL_GUARDED_BY(mu_);
  int64_t observed_lead_ ABSL_GUARDED_BY(mu_) = 0;
};

class TimedWorker : public WorkerStub {
 public:
  TimedWorker(int id, absl::Duration step_time, Clocks* clocks)
      : id_(id), step_time_(step_time), clocks_(clocks) {}
  absl::Status RunStep(const StepRequest& request,
                       StepResponse* response) override {
    clocks_->Start(id_);
    absl::SleepFor(step_time_);
    clocks_->Finish(id_);
    response->set_examples(1);
    return absl::OkStatus();
  }
  WorkerHealth Probe() override { return WorkerHealth::kReady; }
  absl::Status Restore() override { return absl::OkStatus(); }

 private:
  const int id_;
  const absl::Duration step_time_;
  Clocks* const clocks_;
};

struct Outcome {
  int64_t coordinator_lead;
  int64_t observed_lead;
};

// Worker 0 is ten times faster than worker 1; each has `steps` steps of
// its own.
Outcome RunFastAndSlow(int64_t max_staleness, int steps) {
  Clocks clocks(2);
  std::vector<std::unique_ptr<WorkerStub>> stubs;
  stubs.push_back(
      std::make_unique<TimedWorker>(0, absl::Milliseconds(1), &clocks));
  stubs.push_back(
      std::make_unique<TimedWorker>(1, absl::Milliseconds(10), &clocks));
  CoordinatorOptions options;
  options.steal_threshold = 1 << 30;  // each worker runs its own steps
  options.max_staleness = max_staleness;
  ClusterCoordinator coord(std::move(stubs), options);
  for (int i = 0; i < steps; ++i) {
    for (int w = 0; w < 2; ++w) {
      StepRequest r;
      r.set_step(2 * i + w);
      EXPECT_TRUE(coord.Schedule(r, w).ok());
    }
  }
  EXPECT_TRUE(coord.Join().ok());
  EXPECT_EQ(coord.steps_done(), 2 * steps);
  return {coord.max_lead(), clocks.observed_lead()};
}

TEST(BoundedStaleness, FastWorkerStaysWithinTheBound) {
  for (int64_t s : {0, 1, 3}) {
    Outcome o = RunFastAndSlow(s, 20);
    EXPECT_LE(o.observed_lead, s) << "ssp:" << s;
    EXPECT_LE(o.coordinator_lead, s) << "ssp:" << s;
  }
}

TEST(BoundedStaleness, TheBoundIsReachedNotJustRespected) {
  // With a 10x faster worker the fast one always runs into the bound.
  EXPECT_EQ(RunFastAndSlow(3, 20).observed_lead, 3);
}

TEST(BoundedStaleness, WithoutABoundTheFastWorkerRunsAhead) {
  EXPECT_GT(RunFastAndSlow(-1, 20).observed_lead, 10);
}

TEST(BoundedStaleness, AWorkerWithoutWorkDoesNotHoldOthersBack) {
  // Worker 1 has no steps at all; worker 0 must still finish all of its
  // own even with ssp:0.
  Clocks clocks(2);
  std::vector<std::unique_ptr<WorkerStub>> stubs;
  stubs.push_back(
      std::make_unique<TimedWorker>(0, absl::Milliseconds(1), &clocks));
  stubs.push_back(
      std::make_unique<TimedWorker>(1, absl::Milliseconds(1), &clocks));
  CoordinatorOptions options;
  options.steal_threshold = 1 << 30;
  options.max_staleness = 0;
  ClusterCoordinator coord(std::move(stubs), options);
  for (int i = 0; i < 10; ++i) {
    StepRequest r;
    r.set_step(i);
    ASSERT_TRUE(coord.Schedule(r, 0).ok());
  }
  EXPECT_TRUE(coord.Join().ok());
  EXPECT_EQ(coord.steps_done(), 10);
}

}  // namespace
}  // namespace tessera
