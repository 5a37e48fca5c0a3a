#include "worker/params/parallel_calls.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(ParallelCallsTest, RunsEveryIndexOnceAtTheSameTime) {
  ParallelCalls calls(3);
  // Each call waits until all three have started: they must overlap.
  for (int round = 0; round < 50; ++round) {
    std::atomic<int> started{0};
    std::vector<int> ran(5, 0);
    absl::Status s = calls.Run({0, 2, 4}, [&](int k) {
      ++ran[k];
      ++started;
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (started.load() < 3) {
        if (std::chrono::steady_clock::now() > deadline) {
          return absl::DeadlineExceededError("calls did not overlap");
        }
        std::this_thread::yield();
      }
      return absl::OkStatus();
    });
    ASSERT_TRUE(s.ok()) << s << " in round " << round;
    EXPECT_EQ(ran, std::vector<int>({1, 0, 1, 0, 1}));
  }
}

TEST(ParallelCallsTest, ReturnsTheFirstErrorInIndexOrder) {
  ParallelCalls calls(3);
  absl::Status s = calls.Run({0, 1, 2}, [](int k) {
    return k == 0 ? absl::OkStatus()
                  : absl::UnavailableError(k == 1 ? "one" : "two");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "one");
  // The next run starts clean.
  EXPECT_TRUE(calls.Run({2, 1}, [](int) { return absl::OkStatus(); }).ok());
}

TEST(ParallelCallsTest, MoreIndicesThanWidthAndNone) {
  ParallelCalls calls(1);
  std::vector<int> ran;
  EXPECT_TRUE(calls
                  .Run({3, 1, 2},
                       [&](int k) {
                         ran.push_back(k);
                         return absl::OkStatus();
                       })
                  .ok());
  EXPECT_EQ(ran, std::vector<int>({3, 1, 2}));
  EXPECT_TRUE(calls.Run({}, [](int) { return absl::OkStatus(); }).ok());
}

}  // namespace
}  // namespace tessera
