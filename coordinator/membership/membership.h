#ifndef TESSERA_COORDINATOR_MEMBERSHIP_MEMBERSHIP_H_
#define TESSERA_COORDINATOR_MEMBERSHIP_MEMBERSHIP_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/membership/member_state.h"
#include "coordinator/membership/worker_seats.h"
#include "proto/coordinator_service.pb.h"

namespace tessera {

class WorkerTask;

// The workers of a running job and their lives: the one place a worker's
// state changes (as MemberStateMayBecome allows). A worker joins (Join,
// then Activate or Forget) and drains (Drain) here, which asks the seats
// (the ClusterCoordinator) to run or stop its steps; what happens to it
// meanwhile (down, back, drained, removed after not coming back) the
// seats' owner tells with Set. Keeps each worker's state, since when, and
// the history of every change: what tessera_ctl status shows, and which
// workers evaluate and are told to shut down. Indices are the seats':
// never reused, so a worker that left keeps its row.
//
// Down is kept beside the state, as the seats keep it: a worker that is
// down shows as down and keeps the state it comes back to (active or
// draining), which decides whether it may drain.
//
// Thread safety: every method may be called from any thread.
class Membership {
 public:
  // The workers the job started with, active, each in the seat of its
  // index. `seats` (may be null: no worker joins or drains) outlives this;
  // fewer than `min_workers` active workers (at least 1) refuse a drain.
  // `now` stamps them.
  Membership(std::vector<WorkerTask*> initial, WorkerSeats* seats,
             int min_workers, absl::Time now = absl::Now());
  // A table of `initial` that no worker joins or leaves but by Set.
  explicit Membership(std::vector<WorkerTask*> initial,
                      absl::Time now = absl::Now())
      : Membership(std::move(initial), nullptr, 1, now) {}

  // A worker that asks to join: it gets a seat (the seats own it from now
  // on) and the next index, and is joining (takes no step) until Activate or
  // Forget. The seats' refusal (the job is stopping) comes back as it is.
  absl::StatusOr<int> Join(std::unique_ptr<WorkerTask> task,
                           absl::Time now = absl::Now());
  // The queue a worker joining now would serve (WorkerSeats).
  int QueueForNewWorker() const;
  // The joining `worker` serves `queue` and takes steps from now on.
  // FailedPrecondition when it is not joining, InvalidArgument for a queue
  // out of range, UNAVAILABLE while the job recovers (ask again).
  absl::Status Activate(int worker, int queue, absl::Time now = absl::Now());
  // The joining `worker` never became ready (`why`): it leaves without
  // having taken a step. Nothing for a worker that is not joining.
  void Forget(int worker, const std::string& why, absl::Time now = absl::Now());
  // Lets `worker` finish the steps it holds and take no more; its queues go
  // to the others at once, and the seats' owner tells kDrained once its
  // last step is over. NotFound for an unknown worker; FailedPrecondition
  // when it is not active or the active workers left would be fewer than
  // min_workers.
  absl::Status Drain(int worker, absl::Time now = absl::Now());

  // What the seats' owner saw happen to a worker, `note` saying why: down,
  // back (active after down), drained, removed. An unknown index is
  // ignored, and so is a change MemberStateMayBecome does not allow or one
  // that is Join's, Activate's or Drain's to make: news that arrives late
  // (a drain told after the worker drained, a worker back after it began
  // draining) changes nothing.
  void Set(int worker, MemberState state, const std::string& note,
           absl::Time now = absl::Now());

  int size() const;
  // As shown: kDown for a worker that is down.
  MemberState state(int worker) const;
  WorkerTask* task(int worker) const;
  // Active workers that are up, in index order: those that evaluate the
  // test set.
  std::vector<WorkerTask*> Active() const;
  // Every worker still part of the job (not drained or removed): those
  // told to shut down at its end.
  std::vector<WorkerTask*> Present() const;
  // The index of the worker at `address`, or -1.
  int IndexOf(const std::string& address) const;

  // Sets each worker's state and since when in `status`'s workers (by
  // index), and appends the history.
  void Fill(JobStatus* status) const;

 private:
  struct Row {
    WorkerTask* task = nullptr;
    std::string address;
    MemberState state = MemberState::kActive;  // never kDown
    bool down = false;
    absl::Time since;
    // As tessera_ctl status shows it.
    MemberState shown() const { return down ? MemberState::kDown : state; }
  };
  // Moves `worker` to `to` (its shown state must be allowed to become it)
  // and records it.
  void Change(int worker, MemberState to, const std::string& note,
              absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why `worker` cannot drain now, or OK.
  absl::Status CheckDrain(int worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Record(int worker, const std::string& note, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WorkerSeats* const seats_;
  const int min_workers_;

  // Held across the calls to seats_, so that the seats see the changes in
  // the order the rows do.
  mutable absl::Mutex mu_;
  std::vector<Row> rows_ ABSL_GUARDED_BY(mu_);
  std::vector<MembershipChange> history_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_MEMBERSHIP_MEMBERSHIP_H_
