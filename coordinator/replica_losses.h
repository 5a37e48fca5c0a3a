#ifndef TESSERA_COORDINATOR_REPLICA_LOSSES_H_
#define TESSERA_COORDINATOR_REPLICA_LOSSES_H_

#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

// The replicas a mirrored or hybrid job lost since it last repaired them
// or went back to a checkpoint: the ClusterCoordinator records a worker
// that failed a step (its replica missed a step the others made) and
// whether its process went with it; ReplicaRepair and PsRecovery take
// them.
//
// Thread safety: every method may be called from any thread.
class ReplicaLosses {
 public:
  // A worker failed a step. Returns whether it is the first loss since
  // the last Take.
  bool Lost();
  // `worker`'s replica went with its process (it was down after failing).
  void Restarted(int worker);
  // Whether a replica was lost since the last call; forgets the restarted
  // ones too.
  bool Take();
  // The workers whose replica went with their process since the last
  // Take, in index order; the others that failed a step then still hold
  // their replica.
  std::vector<int> restarted() const;

 private:
  mutable absl::Mutex mu_;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  std::set<int> restarted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_REPLICA_LOSSES_H_
