#ifndef TESSERA_COORDINATOR_MEMBERSHIP_MEMBERSHIP_H_
#define TESSERA_COORDINATOR_MEMBERSHIP_MEMBERSHIP_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/membership/member_state.h"
#include "proto/coordinator_service.pb.h"

namespace tessera {

class WorkerTask;

// The workers of a running job, by index (the coordinator's), with each
// one's state, since when, and the history of every change: what
// tessera_ctl status shows, and which workers evaluate and are told to
// shut down. Indices are never reused: a worker that left keeps its row.
//
// Thread safety: every method may be called from any thread.
class Membership {
 public:
  // The workers the job started with, active. `now` stamps them.
  explicit Membership(std::vector<WorkerTask*> initial,
                      absl::Time now = absl::Now());

  // A worker that asks to join, at index `index`, which must be size():
  // the coordinator's index for it. Joining until Set says otherwise.
  void Add(int index, WorkerTask* task, absl::Time now = absl::Now());
  // Records a change (an unknown index is ignored); `note` says why. A
  // change MemberStateMayBecome does not allow is ignored: news that
  // arrives late (a drain told after the worker drained, a worker back
  // after it began draining) changes nothing.
  void Set(int worker, MemberState state, const std::string& note,
           absl::Time now = absl::Now());

  int size() const;
  MemberState state(int worker) const;
  WorkerTask* task(int worker) const;
  // Active workers, in index order: those that evaluate the test set.
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
    MemberState state = MemberState::kActive;
    absl::Time since;
  };
  void Record(int worker, const std::string& note, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<Row> rows_ ABSL_GUARDED_BY(mu_);
  std::vector<MembershipChange> history_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_MEMBERSHIP_MEMBERSHIP_H_
