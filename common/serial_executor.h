#ifndef TESSERA_COMMON_SERIAL_EXECUTOR_H_
#define TESSERA_COMMON_SERIAL_EXECUTOR_H_

#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

// Runs posted tasks one at a time, in order, on its own thread. RPC
// handlers post blocking work here so gRPC's callback threads never block
// (gRPC's callback API requires reactions not to block).
//
// Thread safety: Post may be called from any thread. The destructor runs
// the tasks already posted, then joins.
class SerialExecutor {
 public:
  SerialExecutor() : thread_([this] { Loop(); }) {}
  ~SerialExecutor() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  void Post(std::function<void()> task) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }

  // Posts `f` and returns the future of its result: std::async's contract
  // on a thread kept for the executor's life instead of a new one per call.
  template <typename F>
  auto Async(F f) -> std::future<decltype(f())> {
    auto task =
        std::make_shared<std::packaged_task<decltype(f())()>>(std::move(f));
    std::future<decltype(f())> result = task->get_future();
    Post([task] { (*task)(); });
    return result;
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](SerialExecutor* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
              return self->stopping_ || !self->tasks_.empty();
            },
            this));
        if (tasks_.empty()) return;  // stopping and drained
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace tessera

#endif  // TESSERA_COMMON_SERIAL_EXECUTOR_H_
