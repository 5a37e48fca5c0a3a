#include "coordinator/schedule/ring_changes.h"

#include <utility>

namespace tessera {

void RingChanges::MarkChanged() {
  absl::MutexLock lock(&mu_);
  changed_ = true;
}

void RingChanges::Drain(int worker) {
  absl::MutexLock lock(&mu_);
  leaving_.insert(worker);
  changed_ = true;
}

bool RingChanges::changed() const {
  absl::MutexLock lock(&mu_);
  return changed_;
}

std::set<int> RingChanges::Take() {
  absl::MutexLock lock(&mu_);
  changed_ = false;
  std::set<int> leaving;
  leaving.swap(leaving_);
  return leaving;
}

}  // namespace tessera
