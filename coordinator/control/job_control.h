#ifndef TESSERA_COORDINATOR_CONTROL_JOB_CONTROL_H_
#define TESSERA_COORDINATOR_CONTROL_JOB_CONTROL_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera {

// What operators ask of a running job (tessera_ctl, through the
// Coordinator service), handed to the training loop, which acts on it at
// its next safe point: between epochs, between extra steps, or at once
// while it waits for work.
//
// Thread safety: every method may be called from any thread.
class JobControl {
 public:
  // More steps, run after the job's epochs, continuing the data order.
  // Returns the number of steps asked for so far, these included.
  int64_t AddSteps(int64_t steps) {
    absl::MutexLock lock(&mu_);
    requested_steps_ += steps;
    return requested_steps_;
  }
  int64_t requested_steps() const {
    absl::MutexLock lock(&mu_);
    return requested_steps_;
  }
  // Steps asked for and not yet taken by the loop; takes them.
  int64_t TakeSteps() {
    absl::MutexLock lock(&mu_);
    const int64_t n = requested_steps_ - taken_steps_;
    taken_steps_ = requested_steps_;
    return n;
  }
  // The loop finished every step it took.
  void StepsDone(int64_t steps) {
    absl::MutexLock lock(&mu_);
    done_steps_ += steps;
  }

  // Waits until every step asked for so far has run, or the job ended, or
  // `timeout` passed. The job's error when it ended with one.
  absl::Status Join(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    const int64_t target = requested_steps_;
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return ended_ || (done_steps_ >= target && idle_);
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return absl::DeadlineExceededError("the job is still running steps");
    }
    return end_status_;
  }

  // Asks for a checkpoint and waits until the loop wrote it (its path) or
  // the job ended or `timeout` passed.
  absl::StatusOr<std::string> Checkpoint(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    const int64_t ticket = ++checkpoints_asked_;
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return ended_ || checkpoints_written_ >= ticket;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return absl::DeadlineExceededError(
          "no checkpoint yet: one is taken at the next step boundary");
    }
    if (checkpoints_written_ >= ticket) {
      if (!checkpoint_status_.ok()) return checkpoint_status_;
      return checkpoint_path_;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("the job ended before a checkpoint could be taken",
                     end_status_.ok() ? "" : ": ", end_status_.message()));
  }
  bool checkpoint_wanted() {
    absl::MutexLock lock(&mu_);
    return checkpoints_asked_ > checkpoints_written_;
  }
  // The loop took a checkpoint (or failed to) for every request so far.
  void CheckpointWritten(absl::StatusOr<std::string> path) {
    absl::MutexLock lock(&mu_);
    checkpoints_written_ = checkpoints_asked_;
    checkpoint_status_ = path.status();
    if (path.ok()) checkpoint_path_ = *path;
  }

  // Asks the job to stop after the steps in flight.
  void Stop(std::string reason) {
    absl::MutexLock lock(&mu_);
    if (!stop_) stop_reason_ = std::move(reason);
    stop_ = true;
  }
  bool stop_requested() {
    absl::MutexLock lock(&mu_);
    return stop_;
  }
  std::string stop_reason() {
    absl::MutexLock lock(&mu_);
    return stop_reason_;
  }

  // The loop waits here (when it stays up for commands) until there is
  // something to do.
  void WaitForWork() {
    absl::MutexLock lock(&mu_);
    idle_ = true;
    auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || requested_steps_ > taken_steps_ ||
             checkpoints_asked_ > checkpoints_written_;
    };
    mu_.Await(absl::Condition(&work));
    idle_ = false;
  }
  // The job is over: every waiter returns.
  void End(absl::Status status) {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    end_status_ = std::move(status);
  }

 private:
  mutable absl::Mutex mu_;
  int64_t requested_steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t taken_steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t done_steps_ ABSL_GUARDED_BY(mu_) = 0;
  bool idle_ ABSL_GUARDED_BY(mu_) = false;
  int64_t checkpoints_asked_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t checkpoints_written_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status checkpoint_status_ ABSL_GUARDED_BY(mu_);
  std::string checkpoint_path_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_CONTROL_JOB_CONTROL_H_
