#include "coordinator/parallel/bounded_for_each.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

constexpr absl::Duration kWait = absl::Seconds(20);

// Counts the calls in flight; Enter waits (bounded) until `target` calls
// are in flight at once, or have been.
class InFlight {
 public:
  explicit InFlight(int target) : target_(target) {}
  bool Enter() {
    absl::MutexLock lock(&mu_);
    ++now_;
    peak_ = std::max(peak_, now_);
    return mu_.AwaitWithTimeout(absl::Condition(this, &InFlight::Reached),
                                kWait);
  }
  void Leave() {
    absl::MutexLock lock(&mu_);
    --now_;
  }
  int peak() const {
    absl::MutexLock lock(&mu_);
    return peak_;
  }

 private:
  bool Reached() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return peak_ >= target_;
  }
  const int target_;
  mutable absl::Mutex mu_;
  int now_ ABSL_GUARDED_BY(mu_) = 0;
  int peak_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(BoundedForEachTest, CallsEveryTaskOnce) {
  std::vector<std::atomic<int>> calls(100);
  EXPECT_TRUE(BoundedForEach(100, 8, [&](int i) {
                ++calls[i];
                return absl::OkStatus();
              }).ok());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(calls[i], 1) << "task " << i;
}

TEST(BoundedForEachTest, RunsUpToTheBoundAtOnceAndNeverMore) {
  InFlight in_flight(4);
  std::atomic<int> timed_out{0};
  EXPECT_TRUE(BoundedForEach(16, 4, [&](int) {
                if (!in_flight.Enter()) ++timed_out;
                in_flight.Leave();
                return absl::OkStatus();
              }).ok());
  // Run one after another, the first call would wait for three more in
  // vain.
  EXPECT_EQ(timed_out, 0);
  EXPECT_EQ(in_flight.peak(), 4);
}

TEST(BoundedForEachTest, OneAtATimeRunsInOrderOnTheCallersThread) {
  for (int bound : {1, 0, -3}) {
    std::vector<int> order;
    const std::thread::id caller = std::this_thread::get_id();
    bool elsewhere = false;
    EXPECT_TRUE(BoundedForEach(5, bound, [&](int i) {
                  order.push_back(i);
                  elsewhere |= std::this_thread::get_id() != caller;
                  return absl::OkStatus();
                }).ok());
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4})) << "bound " << bound;
    EXPECT_FALSE(elsewhere) << "bound " << bound;
  }
}

TEST(BoundedForEachTest, NoTasksIsOk) {
  EXPECT_TRUE(BoundedForEach(0, 4, [](int) {
                ADD_FAILURE() << "called";
                return absl::OkStatus();
              }).ok());
}

TEST(BoundedForEachTest, AFailureSkipsTheTasksNotStarted) {
  std::vector<int> called;
  absl::Status s = BoundedForEach(6, 1, [&](int i) {
    called.push_back(i);
    return i == 2 ? absl::InvalidArgumentError("worker 2 refused")
                  : absl::OkStatus();
  });
  EXPECT_EQ(s.message(), "worker 2 refused");
  EXPECT_EQ(called, (std::vector<int>{0, 1, 2}));
}

TEST(BoundedForEachTest, TheLowestFailingTaskIsReportedAsItFailed) {
  // Every call is in flight before any fails: both failures happen, and
  // the lower task's is returned whichever came first.
  InFlight in_flight(8);
  absl::Status s = BoundedForEach(8, 8, [&](int i) {
    in_flight.Enter();
    in_flight.Leave();
    if (i == 6) return absl::UnavailableError("worker 6 did not answer");
    if (i == 3) return absl::DataLossError("worker 3: truncated file");
    return absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_EQ(s.message(), "worker 3: truncated file");
}

}  // namespace
}  // namespace tessera
