#include "coordinator/replica_losses.h"

#include <utility>

namespace tessera {

bool ReplicaLosses::Lost() {
  absl::MutexLock lock(&mu_);
  return !std::exchange(lost_, true);
}

void ReplicaLosses::Restarted(int worker) {
  absl::MutexLock lock(&mu_);
  restarted_.insert(worker);
}

bool ReplicaLosses::Take() {
  absl::MutexLock lock(&mu_);
  restarted_.clear();
  return std::exchange(lost_, false);
}

std::vector<int> ReplicaLosses::restarted() const {
  absl::MutexLock lock(&mu_);
  return {restarted_.begin(), restarted_.end()};
}

}  // namespace tessera
