#ifndef TESSERA_COORDINATOR_SCHEDULE_STEP_QUEUE_H_
#define TESSERA_COORDINATOR_SCHEDULE_STEP_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/rpc/backoff.h"
#include "coordinator/membership/member_state.h"
#include "coordinator/step_future.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// A step waiting to run, and what it carries from one try to the next.
struct QueuedStep {
  StepRequest request;
  StepFuture future;
  // The queue it waits in (the dataset shard it reads); -1: any worker's.
  int queue = -1;
  // Since when, and with which pauses, a step that failed on a live
  // worker is run again (the coordinator's step_retry_timeout).
  absl::Time first_failure = absl::InfiniteFuture();
  Backoff backoff;
  // Its place: steps are taken in this order, and a step queued again
  // goes before every other. Set by StepQueue::Enqueue.
  int64_t seq = 0;
};

// Which worker may take which queued step, and when: the scheduling half
// of ClusterCoordinator, with no threads and no calls to anyone.
//
// Steps are queued by the dataset shard they read (one queue per worker
// the job started with) or for any worker. Each worker serves one or more
// queues and takes its own steps first, in queue order; with nothing of
// its own it steals the oldest step of a queue that is stealable (every
// worker serving it is down, or it holds steal_threshold steps or more).
// With a staleness bound (ssp:S) a worker that has finished c steps takes
// one only when every worker that holds the others back (up, and busy or
// with steps it may take) has finished at least c - S. The slowest of
// them is a running minimum, so the gate costs O(1) per wake-up and
// O(log workers) per change instead of O(workers).
//
// A worker's state is a MemberState, changed only as MemberStateMayBecome
// allows: joining (takes nothing until Activate), active, draining
// (finishes what it holds, takes no more), drained or removed. Down
// (failed, not back) is kept beside it (SetDown): a down worker keeps its
// queues and its state, active or draining, which it finds again when it
// is back. A worker that leaves hands its queues to the active worker
// serving the fewest.
//
// The owner runs the threads: `wake` (called from within the methods
// below) tells it which waiting worker may now have a step, or
// kEveryWorker.
//
// Thread safety: none; the owner serializes every call.
class StepQueue {
 public:
  static constexpr int kEveryWorker = -1;
  struct Options {
    // See CoordinatorOptions: steal_threshold and max_staleness (-1: no
    // bound).
    int steal_threshold = 8;
    int64_t max_staleness = -1;
  };
  using WakeFn = std::function<void(int worker)>;
  // Where a leaving worker's queue went.
  struct Handover {
    int queue;
    int to;
  };

  // `num_queues` active workers, worker w serving queue w.
  StepQueue(int num_queues, Options options, WakeFn wake);
  StepQueue(const StepQueue&) = delete;
  StepQueue& operator=(const StepQueue&) = delete;

  int num_queues() const { return num_queues_; }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  // Steps queued, in every queue.
  int64_t size() const { return queued_; }

  // Queues `step` in step.queue (-1: any worker's), at the back or at the
  // front (`front`: a step that ran and goes again), and wakes the
  // workers that may take it. REQUIRES: -1 <= step.queue < num_queues().
  void Enqueue(QueuedStep step, bool front);
  // Whether `worker` may take a step now: it is active and up, within the
  // staleness bound, and it has a step of its own or one to steal.
  // O(1) without a staleness bound: it runs at every wake-up of a worker.
  bool HasWork(int worker) const;
  // Whether the queues `worker` serves, or the unassigned steps, hold any.
  bool HasOwn(int worker) const;
  // Removes the first queued of the steps of `worker`'s queues and the
  // unassigned ones. REQUIRES: HasOwn(worker).
  QueuedStep PopOwn(int worker);
  // Moves the next steps for `worker` into *out (cleared first): its own
  // first (up to `max_steps` of them without a staleness bound, which
  // counts steps one at a time), else the oldest stealable one. Marks the
  // worker busy. REQUIRES: HasWork(worker).
  void Take(int worker, int max_steps, std::vector<QueuedStep>* out);
  // Removes every queued step, in queue order by shard, then the
  // unassigned ones.
  std::vector<QueuedStep> Clear();

  // Any worker may take queue `queue`'s steps: every worker serving it is
  // down, or it holds at least steal_threshold of them.
  bool Stealable(int queue) const;

  // A step of `worker` finished.
  void Finish(int worker);
  // Whether `worker` runs steps (taken, not yet over): a busy worker holds
  // the others back under a staleness bound.
  void SetBusy(int worker, bool busy);
  // A worker failed and is waited for (true), or came back.
  void SetDown(int worker, bool down);
  bool down(int worker) const { return workers_[worker].down; }
  // Whether a worker that has not left (drained or removed) is down.
  bool AnyDown() const;

  // The fewest finished steps of a worker that holds the others back
  // (up, not gone, and busy or with steps it may take), `except` left
  // out; INT64_MAX when there is none. O(1), from a running minimum kept
  // in O(log workers) per change: it runs for every step and every
  // wake-up of a worker. REQUIRES: a staleness bound (without one the
  // minimum is not kept and this is INT64_MAX).
  int64_t Slowest(int except = -1) const;
  // How far `worker` is ahead of the slowest worker that still has work.
  // O(1). REQUIRES: a staleness bound.
  int64_t Lead(int worker) const;
  // Under a staleness bound: wakes the workers that the slowest moving up
  // since the last call lets take a step (more than S steps ahead of it
  // then, at most S ahead of it now); nobody when it did not go up. For
  // the owner to call after a step finishes or a worker goes idle, when
  // the slowest may move. O(log workers + the workers woken): a held-back
  // worker is woken once each time it may go on, not at every step.
  void WakeFreed();
  // With a staleness bound: the largest Lead a worker had when it took a
  // step.
  int64_t max_lead() const { return max_lead_; }
  // Steps `worker` finished (without the credit it joined with).
  int64_t progress(int worker) const;

  // Never kDown: see SetDown and down.
  MemberState state(int worker) const { return workers_[worker].state; }
  // A simple change of state: joining to removed (it never became ready),
  // draining to drained (its steps are over). REQUIRES:
  // MemberStateMayBecome(state(worker), state).
  void set_state(int worker, MemberState state);
  // Adds a joining worker serving nothing; returns its index.
  int AddWorker();
  // Adds an empty queue that nobody serves yet; returns its index. For a
  // worker that must take only the steps scheduled for it (a replica's
  // place in a mirrored round), not share a shard's queue.
  int AddQueue();
  // The queues `worker` serves.
  const std::vector<int>& serves(int worker) const {
    return workers_[worker].serves;
  }
  // The joining `worker` serves `queue` and is active from now on. Under
  // a staleness bound it counts as level with the slowest active worker
  // that is up, so that it neither holds the others back nor runs ahead.
  // REQUIRES: state(worker) == kJoining, 0 <= queue < num_queues().
  void Activate(int worker, int queue);
  // `worker` leaves (`to`: kDraining, or kRemoved, which is no longer
  // down):
  // its queues go to the active workers serving the fewest. Returns where
  // each went (none where an active worker still serves it, or none is
  // left).
  std::vector<Handover> Leave(int worker, MemberState to);
  // The queue a worker added now would serve: the one with the fewest
  // live servers (then the most steps waiting, then the lowest index).
  int QueueForNewWorker() const;
  // Active workers (not draining or gone), down ones included.
  int ActiveWorkers() const;

 private:
  struct Worker {
    MemberState state = MemberState::kJoining;
    bool down = false;
    bool busy = false;
    int64_t finished = 0;
    // Of finished, what a worker that joined under a staleness bound was
    // counted as having finished (the slowest worker's steps then).
    int64_t credit = 0;
    // The queues it serves, and how many of them hold steps.
    std::vector<int> serves;
    int serves_queued = 0;
    // Where it stands in up_ and holding_, and under which count.
    bool in_up = false;
    bool in_holding = false;
    int64_t key = 0;
  };
  // (finished, worker): the running minimum of the finished counts.
  using Ranking = std::set<std::pair<int64_t, int>>;

  // The one place a worker's state changes. REQUIRES (checked in debug
  // builds): MemberStateMayBecome(state(worker), to).
  void SetState(int worker, MemberState to);
  // The oldest stealable step. REQUIRES: stealable_count_ > 0.
  QueuedStep Steal();
  // Keeps stealable_ and stealable_count_ right after queue `queue` or its
  // servers changed; wakes every worker when it became stealable.
  void UpdateStealable(int queue);
  // Every queue `worker` serves, after its down changed.
  void UpdateStealableOf(int worker);
  // Live servers of `queue` (not gone), down ones included.
  int LiveServers(int queue) const;
  // Puts `worker` back in up_ and holding_ after anything they rank by
  // changed (its finished count, down, state, busy, its queues).
  // O(log workers).
  void Rerank(int worker);
  // After queue `queue` changed (`was_empty`: it was empty before):
  // keeps its servers' serves_queued right.
  void QueueChanged(int queue, bool was_empty);

  int num_queues_;        // grows by AddQueue
  const int num_shards_;  // the queues of the start, one per shard
  const Options options_;
  const WakeFn wake_;
  std::vector<Worker> workers_;
  // Each queue's servers.
  std::vector<std::vector<int>> servers_;
  // The queue, split by shard so that a worker finds its next step
  // without reading the others' (in queue order by QueuedStep::seq).
  std::vector<std::deque<QueuedStep>> own_;
  std::deque<QueuedStep> any_;  // no shard
  int64_t queued_ = 0;          // in own_ and any_
  int64_t back_seq_ = 0;
  int64_t front_seq_ = -1;
  std::vector<bool> stealable_;
  int stealable_count_ = 0;
  int64_t max_lead_ = 0;
  // Under a staleness bound (else empty): the workers that are up and
  // not gone, and of them those that hold the others back even with no
  // unassigned step queued (busy, or a queue of theirs holds steps).
  Ranking up_;
  Ranking holding_;
  // The lowest Slowest() since the last WakeFreed (it follows every drop
  // at once and a rise only there): a worker held back since then is
  // more than S steps ahead of it, and WakeFreed wakes it once it may go
  // on.
  int64_t woken_for_ = std::numeric_limits<int64_t>::max();
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_SCHEDULE_STEP_QUEUE_H_
