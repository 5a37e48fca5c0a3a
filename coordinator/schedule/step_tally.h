#ifndef TESSERA_COORDINATOR_SCHEDULE_STEP_TALLY_H_
#define TESSERA_COORDINATOR_SCHEDULE_STEP_TALLY_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera {

// How many steps the workers finished and how many ran again, and each
// worker's recent rate: what the job's status shows, apart from who may
// take which step (StepQueue). Its own lock, so that reading the status
// never waits for the scheduler.
//
// Thread safety: every method may be called from any thread.
class StepTally {
 public:
  // Per worker, the finish times kept for its rate.
  static constexpr size_t kRateSamples = 1024;

  explicit StepTally(int workers);

  // A worker joined: it is the next index.
  void AddWorker();
  // A step of `worker` finished at `now`.
  void Finished(int worker, absl::Time now);
  // `steps` steps run again (a worker died in them, a repair).
  void CountRerun(int64_t steps);

  int64_t done() const;
  int64_t rerun() const;
  // Per worker: steps finished per second over the `window` before `now`
  // (0 for a worker that finished none in it, so that an idle worker does
  // not show the job's average).
  std::vector<double> per_second(absl::Duration window, absl::Time now) const;

 private:
  mutable absl::Mutex mu_;
  // Per worker: when its last kRateSamples steps finished.
  std::vector<std::deque<absl::Time>> finish_times_ ABSL_GUARDED_BY(mu_);
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rerun_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_SCHEDULE_STEP_TALLY_H_
