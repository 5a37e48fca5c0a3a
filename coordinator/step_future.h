#ifndef TESSERA_COORDINATOR_STEP_FUTURE_H_
#define TESSERA_COORDINATOR_STEP_FUTURE_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// The result of a scheduled step, like TF's RemoteValue: not ready, then
// either the step's response or its error (Cancelled when the step was
// dropped because an earlier step failed).
//
// Thread safety: copies share one state; any thread may wait on it.
class StepFuture {
 public:
  StepFuture() : state_(std::make_shared<State>()) {}

  // Blocks until the step is resolved.
  absl::StatusOr<StepResponse> Get() const {
    absl::MutexLock lock(&state_->mu);
    state_->mu.Await(absl::Condition(&state_->ready));
    return state_->result;
  }

  bool ready() const {
    absl::MutexLock lock(&state_->mu);
    return state_->ready;
  }

  // Resolves the future; later calls are ignored.
  void Set(absl::StatusOr<StepResponse> result) const {
    std::vector<Callback> callbacks;
    {
      absl::MutexLock lock(&state_->mu);
      if (state_->ready) return;
      state_->result = std::move(result);
      state_->ready = true;
      callbacks.swap(state_->callbacks);
    }
    // The result no longer changes: read without the lock.
    for (const Callback& callback : callbacks) callback(state_->result);
  }

  // Calls `callback` with the result once the step is resolved: at once
  // when it is, else on the thread that resolves it. For waiting on
  // several steps at once without polling them.
  using Callback = std::function<void(const absl::StatusOr<StepResponse>&)>;
  void OnReady(Callback callback) const {
    {
      absl::MutexLock lock(&state_->mu);
      if (!state_->ready) {
        state_->callbacks.push_back(std::move(callback));
        return;
      }
    }
    callback(state_->result);
  }

 private:
  struct State {
    absl::Mutex mu;
    bool ready ABSL_GUARDED_BY(mu) = false;
    absl::StatusOr<StepResponse> result ABSL_GUARDED_BY(mu);
    std::vector<Callback> callbacks ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<State> state_;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_STEP_FUTURE_H_
