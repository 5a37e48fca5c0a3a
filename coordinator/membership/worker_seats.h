#ifndef TESSERA_COORDINATOR_MEMBERSHIP_WORKER_SEATS_H_
#define TESSERA_COORDINATOR_MEMBERSHIP_WORKER_SEATS_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/membership/member_state.h"
#include "coordinator/worker_stub.h"

namespace tessera {

// Where the workers' steps run, as Membership drives it: a seat per
// worker (its thread, the queues it serves). ClusterCoordinator is one.
// Membership decides every change of a worker's life and then asks for
// it here; the seats refuse what their own state no longer allows (the
// job stops or recovers, or a worker left meanwhile for a failure).
//
// Membership calls these under its own lock: an implementation must not
// call back into the Membership from within them.
class WorkerSeats {
 public:
  virtual ~WorkerSeats() = default;

  // A seat for a joining worker: it takes no step until Serve. Returns its
  // index, the next one. FailedPrecondition once the job is stopping.
  virtual absl::StatusOr<int> AddSeat(std::unique_ptr<WorkerStub> worker) = 0;
  // The queues steps are scheduled to (the workers the job started with).
  virtual int num_queues() const = 0;
  // The queue a worker seated now would serve: the one with the fewest
  // live servers (then the most steps waiting, then the lowest index).
  virtual int QueueForNewWorker() const = 0;
  // The joining `worker` serves `queue` and takes steps from now on.
  // UNAVAILABLE while the job recovers from an error (ask again then);
  // FailedPrecondition once it is stopping. REQUIRES: `worker` is joining
  // and 0 <= queue < num_queues().
  virtual absl::Status Serve(int worker, int queue) = 0;
  // `worker` takes no more steps (`to`: kDraining, it finishes those it
  // holds; kRemoved, a joining worker that never became ready); its
  // queues go to the active workers serving the fewest. FailedPrecondition
  // when the seat's state does not allow it (it left meanwhile).
  virtual absl::Status Leave(int worker, MemberState to) = 0;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_MEMBERSHIP_WORKER_SEATS_H_
