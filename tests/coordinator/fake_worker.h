// Test doubles for ClusterCoordinator tests: a scripted, thread-safe
// WorkerStub, a log of every step attempt, and a fixture that bounds every
// wait.

#ifndef TESSERA_TESTS_COORDINATOR_FAKE_WORKER_H_
#define TESSERA_TESTS_COORDINATOR_FAKE_WORKER_H_

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/example_digest.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/step_future.h"
#include "coordinator/worker_stub.h"
#include "gtest/gtest.h"

namespace tessera {
namespace coordinator_testing {

inline constexpr absl::Duration kWait = absl::Seconds(20);

struct Attempt {
  int worker;
  int64_t step;
  std::string request;  // serialized StepRequest
  bool ok;
};

// What every fake worker saw, in order.
class Log {
 public:
  void Add(Attempt a) {
    absl::MutexLock lock(&mu_);
    attempts_.push_back(std::move(a));
  }
  std::vector<Attempt> attempts() const {
    absl::MutexLock lock(&mu_);
    return attempts_;
  }
  // Steps that succeeded, with the number of successes.
  std::map<int64_t, int> Successes() const {
    std::map<int64_t, int> out;
    for (const Attempt& a : attempts()) out[a.step] += a.ok ? 1 : 0;
    return out;
  }
  bool WaitForAttempts(size_t n) const {
    absl::MutexLock lock(&mu_);
    struct Arg {
      const std::vector<Attempt>* attempts;
      size_t n;
    } arg{&attempts_, n};
    return mu_.AwaitWithTimeout(
        absl::Condition(
            +[](Arg* a) { return a->attempts->size() >= a->n; }, &arg),
        kWait);
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Attempt> attempts_ ABSL_GUARDED_BY(mu_);
};

// A scripted worker. Steps in `fail` fail once with the given status; if
// `die_on_failure`, the worker then reports dead until `dead_checks` more
// Probe() calls have been made (-1: until Revive()).
class FakeWorker : public WorkerStub {
 public:
  FakeWorker(int id, Log* log) : id_(id), log_(log) {}

  absl::Status RunStep(const StepRequest& request,
                       StepResponse* response) override {
    if (request.step() == gated_step_) {
      if (!entered_.HasBeenNotified()) entered_.Notify();
      if (!gate_.WaitForNotificationWithTimeout(kWait)) {
        ADD_FAILURE() << "gate of step " << request.step() << " never opened";
      }
    }
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      auto repeated = fail_repeatedly_.find(request.step());
      if (repeated != fail_repeatedly_.end() && repeated->second.second != 0) {
        status = repeated->second.first;
        --repeated->second.second;
      }
      auto it = fail_.find(request.step());
      if (it != fail_.end()) {
        status = it->second;
        fail_.erase(it);
        if (die_on_failure_) {
          // A worker that died comes back as a new process, unconfigured.
          alive_ = false;
          lost_state_ = true;
        }
      }
    }
    log_->Add({id_, request.step(), request.SerializeAsString(), status.ok()});
    if (!status.ok()) return status;
    response->set_loss(0.5f * request.step());
    response->set_examples(request.example_ids().size() / 8);
    response->set_example_digest(DigestOfStep(request));
    response->set_correct(id_);
    return absl::OkStatus();
  }

  // Records each call's steps, then runs them as the default does.
  absl::Status RunSteps(
      const StepsRequest& request,
      const std::function<void(int, StepResponse)>& done) override {
    {
      absl::MutexLock lock(&mu_);
      std::vector<int64_t> steps;
      for (const StepRequest& r : request.steps()) steps.push_back(r.step());
      calls_.push_back(std::move(steps));
    }
    return WorkerStub::RunSteps(request, done);
  }
  // The steps of each RunSteps call (not single RunStep calls), in order.
  std::vector<std::vector<int64_t>> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

  WorkerHealth Probe() override {
    absl::MutexLock lock(&mu_);
    if (!alive_ && dead_checks_ >= 0 && dead_checks_-- == 0) alive_ = true;
    if (!alive_) return WorkerHealth::kDown;
    return lost_state_ ? WorkerHealth::kLostState : WorkerHealth::kReady;
  }

  absl::Status Restore() override {
    absl::MutexLock lock(&mu_);
    ++restores_;
    if (failed_restores_ > 0) {
      --failed_restores_;
      return restore_error_;
    }
    lost_state_ = false;
    return absl::OkStatus();
  }
  // The next `times` Restore calls fail with `status` (a Configure that
  // raced another one, or needed a server that was down).
  void FailRestores(absl::Status status, int times) {
    absl::MutexLock lock(&mu_);
    restore_error_ = std::move(status);
    failed_restores_ = times;
  }

  // The worker was restarted behind the coordinator's back: it answers,
  // but its configuration is gone until Restore.
  void LoseState() {
    absl::MutexLock lock(&mu_);
    lost_state_ = true;
  }

  void Fail(int64_t step, absl::Status status, bool die, int dead_checks) {
    absl::MutexLock lock(&mu_);
    fail_[step] = std::move(status);
    die_on_failure_ = die;
    dead_checks_ = dead_checks;
  }
  // RunStep of `step` fails with `status` `times` times (-1: always), the
  // worker staying alive.
  void FailRepeatedly(int64_t step, absl::Status status, int times) {
    absl::MutexLock lock(&mu_);
    fail_repeatedly_[step] = {std::move(status), times};
  }
  void Revive() {
    absl::MutexLock lock(&mu_);
    alive_ = true;
  }
  int restores() const {
    absl::MutexLock lock(&mu_);
    return restores_;
  }
  // RunStep of `step` blocks until Open(); call before scheduling it.
  void Gate(int64_t step) { gated_step_ = step; }
  void Open() { gate_.Notify(); }
  // Waits until RunStep of the gated step has started.
  bool WaitEntered() { return entered_.WaitForNotificationWithTimeout(kWait); }

 private:
  const int id_;
  Log* const log_;
  int64_t gated_step_ = -1;
  absl::Notification entered_;
  absl::Notification gate_;
  mutable absl::Mutex mu_;
  std::map<int64_t, absl::Status> fail_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::pair<absl::Status, int>> fail_repeatedly_
      ABSL_GUARDED_BY(mu_);
  bool die_on_failure_ ABSL_GUARDED_BY(mu_) = false;
  bool alive_ ABSL_GUARDED_BY(mu_) = true;
  int dead_checks_ ABSL_GUARDED_BY(mu_) = -1;
  int restores_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status restore_error_ ABSL_GUARDED_BY(mu_);
  int failed_restores_ ABSL_GUARDED_BY(mu_) = 0;
  bool lost_state_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::vector<int64_t>> calls_ ABSL_GUARDED_BY(mu_);
};

inline StepRequest Request(int64_t step) {
  StepRequest r;
  r.set_epoch(1);
  r.set_step(step);
  std::string ids;
  for (int64_t id = step * 3; id < step * 3 + 3; ++id) {
    ids.append(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  r.set_example_ids(ids);
  r.set_shard_begin(0);
  r.set_shard_end(1000);
  return r;
}

inline bool WaitReady(const StepFuture& f) {
  const absl::Time deadline = absl::Now() + kWait;
  while (!f.ready()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// The future's result, or DeadlineExceeded if it never resolves.
inline absl::StatusOr<StepResponse> GetWithin(const StepFuture& f) {
  if (!WaitReady(f)) return absl::DeadlineExceededError("never resolved");
  return f.Get();
}

class CoordinatorFixture : public ::testing::Test {
 protected:
  void Start(int n, int steal_threshold = 8,
             absl::Duration step_retry_timeout = absl::Seconds(5)) {
    std::vector<std::unique_ptr<WorkerStub>> stubs;
    for (int i = 0; i < n; ++i) {
      workers_.push_back(new FakeWorker(i, &log_));
      stubs.emplace_back(workers_.back());
    }
    CoordinatorOptions options;
    options.worker_recovery_timeout = absl::Seconds(2);
    options.steal_threshold = steal_threshold;
    options.step_retry_timeout = step_retry_timeout;
    options.steps_per_call = steps_per_call_;
    options.max_staleness = max_staleness_;
    options.remove_lost_workers = remove_lost_workers_;
    options.replicas_in_lockstep = replicas_in_lockstep_;
    options.min_workers = min_workers_;
    options.on_member_event = [this](int worker, MemberState event,
                                     const std::string& note) {
      if (tell_also_) tell_also_(worker, event, note);
      absl::MutexLock lock(&events_mu_);
      events_.emplace_back(worker, event);
    };
    coord_ = std::make_unique<ClusterCoordinator>(std::move(stubs), options);
  }

  StepFuture MustSchedule(int64_t step, int preferred) {
    absl::StatusOr<StepFuture> f = coord_->Schedule(Request(step), preferred);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? *f : StepFuture();
  }

  // Join, bounded: a hang aborts the test binary instead of blocking it.
  absl::Status JoinBounded() {
    absl::Notification done;
    absl::Status status;
    std::thread t([&] {
      status = coord_->Join();
      done.Notify();
    });
    if (!done.WaitForNotificationWithTimeout(kWait)) {
      ADD_FAILURE() << "Join did not return";
      std::abort();
    }
    t.join();
    return status;
  }

  // The membership changes told so far (each the new state).
  std::vector<std::pair<int, MemberState>> events() const {
    absl::MutexLock lock(&events_mu_);
    return events_;
  }
  bool WaitForEvent(int worker, MemberState event) const {
    absl::MutexLock lock(&events_mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(events_mu_) {
      for (const auto& e : events_) {
        if (e.first == worker && e.second == event) return true;
      }
      return false;
    };
    return events_mu_.AwaitWithTimeout(absl::Condition(&seen), kWait);
  }

  // Set before Start.
  int steps_per_call_ = 1;
  int64_t max_staleness_ = -1;
  bool remove_lost_workers_ = false;
  bool replicas_in_lockstep_ = false;
  int min_workers_ = 1;
  // Also told of every membership change, before events() has it (set
  // before Start).
  std::function<void(int, MemberState, const std::string&)> tell_also_;
  mutable absl::Mutex events_mu_;
  std::vector<std::pair<int, MemberState>> events_ ABSL_GUARDED_BY(events_mu_);
  Log log_;
  std::vector<FakeWorker*> workers_;  // owned by coord_
  std::unique_ptr<ClusterCoordinator> coord_;
};

}  // namespace coordinator_testing
}  // namespace tessera

#endif  // TESSERA_TESTS_COORDINATOR_FAKE_WORKER_H_
