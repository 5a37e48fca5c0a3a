#ifndef TESSERA_COORDINATOR_SCHEDULE_RING_CHANGES_H_
#define TESSERA_COORDINATOR_SCHEDULE_RING_CHANGES_H_

#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

// The all-reduce ring's changes waiting for the next round boundary
// (replicas in lockstep): whether its members changed since it was last
// re-formed, and the members that drain, which run their parts of the
// rounds already scheduled and leave it then. Thread safety: every method
// may be called from any thread.
class RingChanges {
 public:
  // A member joined or was removed: the ring is re-formed at the next
  // boundary.
  void MarkChanged();
  // `worker` drains: it leaves the ring at the next boundary.
  void Drain(int worker);
  // Whether the ring changed since the last Take.
  bool changed() const;
  // At a round boundary: clears the change and returns the members that
  // drain, which leave the ring now.
  std::set<int> Take();

 private:
  mutable absl::Mutex mu_;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  std::set<int> leaving_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_SCHEDULE_RING_CHANGES_H_
