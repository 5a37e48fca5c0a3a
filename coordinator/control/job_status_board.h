#ifndef TESSERA_COORDINATOR_CONTROL_JOB_STATUS_BOARD_H_
#define TESSERA_COORDINATOR_CONTROL_JOB_STATUS_BOARD_H_

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/coordinator_service.pb.h"

namespace tessera {

// The job's state as operators see it (tessera_ctl status): the training
// loop and its parts write into it, the Coordinator service reads a copy.
//
// Thread safety: any thread.
class JobStatusBoard {
 public:
  // Calls `update(JobStatus*)` under the board's lock.
  template <typename Fn>
  void Update(Fn&& update) {
    absl::MutexLock lock(&mu_);
    std::forward<Fn>(update)(&status_);
  }
  JobStatus Snapshot() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  mutable absl::Mutex mu_;
  JobStatus status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_CONTROL_JOB_STATUS_BOARD_H_
