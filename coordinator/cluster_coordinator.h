#ifndef TESSERA_COORDINATOR_CLUSTER_COORDINATOR_H_
#define TESSERA_COORDINATOR_CLUSTER_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/membership/member_state.h"
#include "coordinator/membership/worker_seats.h"
#include "coordinator/schedule/ring_changes.h"
#include "coordinator/schedule/step_queue.h"
#include "coordinator/schedule/step_tally.h"
#include "coordinator/step_future.h"
#include "coordinator/worker_stub.h"
#include "proto/worker_service.pb.h"

namespace tessera {

class ReplicaLosses;  // coordinator/replica_losses.h

struct CoordinatorOptions {
  // How long a failed worker may take to come back before the job fails.
  absl::Duration worker_recovery_timeout = absl::Minutes(5);
  // How long a step that failed on a worker that still answers, with
  // UNAVAILABLE or DEADLINE_EXCEEDED, is run again (with backoff) before
  // its error becomes the job's. Such a worker could not reach a parameter
  // server: a network partition or a lost connection, which heals. A
  // server that really died is found meanwhile by the heartbeat, whose
  // Abort ends the retries and starts the recovery. 0: no retry.
  absl::Duration step_retry_timeout = absl::Minutes(1);
  // A worker with nothing of its own takes another's step only when that
  // worker is down or has at least this many steps waiting: taking over a
  // step means loading that worker's dataset shard.
  int steal_threshold = 8;
  // Bounded staleness (ssp:S): a worker starts its step c (it has finished
  // c steps) only when every worker that still has work has finished at
  // least c - S. Workers with nothing queued and nothing in flight do not
  // hold the others back, so uneven shards cannot deadlock an epoch's end.
  // -1: no bound (async).
  int64_t max_staleness = -1;
  // Asynchronous mode (no staleness bound): a worker takes up to this many
  // of its queued steps at once and runs them in one call
  // (WorkerStub::RunSteps), as Keras' steps_per_execution. Small steps are
  // bound by the call's round trip and wake-ups, not by their work. Each
  // step still has its own result; a failure re-runs only the step that
  // failed and the ones after it.
  int steps_per_call = 1;
  // Mirrored and hybrid: every worker holds a replica that meets the
  // others' in each step's all-reduce. A replica that missed a step
  // differs from the others for good, and running the step again would
  // pair all-reduces of different steps. A failed step then ends the
  // epoch with an Aborted error once the worker that failed answers again
  // (replica_losses() says so): the job restores every replica and server
  // from its last checkpoint (PsRecovery), or stops without one.
  bool replicas_in_lockstep = false;
  // A worker that is not back within worker_recovery_timeout is removed
  // from the job, its steps going to the others, instead of failing the
  // job. Nobody restarts: the job goes on with the workers it has. With
  // replicas_in_lockstep the ring changes (ring_changed) and its round
  // runs again on the members left (ReplicaRepair).
  bool remove_lost_workers = false;
  // The floor: fewer active workers than this (after removals and drains;
  // at least 1) fail the job. (Membership refuses a drain that would
  // cross it.)
  int min_workers = 1;
  // Told of every change of a worker's state that the coordinator sees
  // happen (MemberState: failed and waited for (down), came back (active),
  // finished draining (it holds no step and takes none), or was removed
  // after not coming back), on the thread that made it, outside the
  // coordinator's lock: for Membership::Set. May be empty.
  std::function<void(int worker, MemberState state, const std::string& note)>
      on_member_event;
};

// Runs scheduled steps on workers, as TF's ClusterCoordinator: one thread
// per worker, each with at most one step in flight, serving one shared
// queue. Schedule returns a future; Join waits for everything scheduled.
//
// Errors: a step that fails because its worker died is re-run, on the
// worker that owns its data when it comes back or on another one, with
// the same examples. A step that fails on a live worker with UNAVAILABLE
// or DEADLINE_EXCEEDED is re-run the same way for up to
// step_retry_timeout. Any other failure is kept as the job's first error:
// queued steps are cancelled and the error is returned once, by the next
// Schedule or Join.
//
// Seats: steps are queued by the dataset shard they read (one queue per
// worker the coordinator started with), and each worker serves one or more
// queues. Membership decides who joins and drains and asks for it here
// (WorkerSeats): a worker that joins serves the queue with the fewest
// servers and takes steps at once (Serve); a worker that drains or is
// removed hands its queues to the worker serving the fewest (Leave), so
// its steps run elsewhere with the same examples, each once. What happens
// to a worker meanwhile (down, back, removed after not coming back,
// drained) on_member_event tells.
//
// Thread safety: every method may be called from any thread.
class ClusterCoordinator : public WorkerSeats {
 public:
  ClusterCoordinator(std::vector<std::unique_ptr<WorkerStub>> workers,
                     CoordinatorOptions options);
  // Stops the worker threads after their current step; queued steps are
  // cancelled.
  ~ClusterCoordinator() override;
  ClusterCoordinator(const ClusterCoordinator&) = delete;
  ClusterCoordinator& operator=(const ClusterCoordinator&) = delete;

  // Queues a step, preferably for `preferred_worker` (-1: any).
  absl::StatusOr<StepFuture> Schedule(StepRequest request,
                                      int preferred_worker);

  // Waits until every scheduled step has finished or an error is recorded;
  // returns (and clears) the first error.
  absl::Status Join();

  // Records `error` as the job's error unless one is already recorded:
  // queued steps are cancelled and the next Join returns it once the steps
  // in flight are over. For failures noticed outside a step, such as a
  // parameter server that stops answering its heartbeat.
  void Abort(absl::Status error);

  // WorkerSeats, as Membership drives them (it decides each change and
  // checks it first).
  absl::StatusOr<int> AddSeat(std::unique_ptr<WorkerStub> worker) override;
  absl::Status Serve(int worker, int queue) override;
  absl::Status Leave(int worker, MemberState to) override;
  int QueueForNewWorker() const override;

  // Replicas (replicas_in_lockstep): the all-reduce ring. Every active
  // worker (down ones included) is a member with a queue of its own, from
  // which it takes its part of each round: a worker of the start serves
  // its shard's queue, one that joined (Serve) a new queue, so it takes no
  // step until the rounds have a part for it. A member that drains (Leave)
  // runs its parts of the rounds scheduled and leaves at the next TakeRing.
  // ring_changed() says that the
  // members changed since the last TakeRing; TakeRing (at a round boundary,
  // no step in flight) returns them in index order and clears it.
  struct RingSeat {
    int worker;
    int queue;
  };
  bool ring_changed() const { return ring_.changed(); }
  std::vector<RingSeat> TakeRing();

  int num_workers() const;
  // The queues steps are scheduled to: the workers the coordinator was
  // started with.
  int num_queues() const override { return num_queues_; }
  // The replicas lost (replicas_in_lockstep): a worker that failed a step
  // is recorded there before its error is, and one that was down as
  // restarted before it is back. ReplicaRepair and PsRecovery take them.
  ReplicaLosses* replica_losses() const { return replica_losses_.get(); }
  // Counts steps that ran again after a repair (steps_rerun).
  void CountRerun(int64_t steps) { tally_.CountRerun(steps); }
  int64_t steps_done() const { return tally_.done(); }
  int64_t steps_rerun() const { return tally_.rerun(); }
  // Per worker: steps finished, and whether it is down (failed, not back)
  // or gone (drained or removed).
  std::vector<std::pair<int64_t, bool>> worker_progress() const;
  // Whether `worker` left the job for good (drained or removed): nothing
  // waits for it to come back.
  bool gone(int worker) const;
  // Waits until no worker is down (each failed one back, or gone), or an
  // error is recorded (one not back within --worker_recovery_timeout), the
  // coordinator stops, or `timeout` passes; true when none is down. Join
  // does not wait for a failed worker's recovery (its step went back to
  // the queue), so a recovery that needs every worker waits here.
  bool AwaitWorkersBack(absl::Duration timeout) const;
  // Per worker: steps finished per second over the last `window` (0 for a
  // worker that finished none in it, so an idle worker does not show the
  // job's average).
  std::vector<double> steps_per_second(absl::Duration window) const {
    return tally_.per_second(window, absl::Now());
  }
  // With a staleness bound: the largest lead, in finished steps, that a
  // worker starting a step had over the slowest worker with work (0 with
  // one worker, or without a bound).
  int64_t max_lead() const;

 private:
  void WorkerLoop(int worker, WorkerStub* remote);
  // Waits for the next steps for `worker` and takes them into *out (one,
  // or in asynchronous mode up to steps_per_call of its own); false when
  // stopping.
  bool Take(int worker, std::vector<QueuedStep>* out);
  // Runs the steps `worker` took (one call, or one per step); *finished
  // counts those that finished, each counted and its future set at once.
  // Returns the error of the first that failed.
  absl::Status RunTaken(int worker, WorkerStub* remote,
                        std::vector<QueuedStep>* taken, StepsRequest* request,
                        size_t* finished);
  // Puts the taken steps from `first` on, which did not run, back at the
  // front of the queue (or cancels them after an error).
  void RequeueAfter(std::vector<QueuedStep>* taken, size_t first);
  // Puts a step that did not finish back at the front of the queue, or
  // cancels it when the job has an error or is stopping. True if queued.
  bool ReturnToQueue(QueuedStep p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A draining worker whose steps are over has drained: tells it.
  void EndDrain(int worker);
  // A step that failed on `worker` with `status`: re-run it (the worker
  // died, or it could not reach a server for a while) or fail the job.
  void HandleFailure(int worker, WorkerStub* remote, const absl::Status& status,
                     QueuedStep p);
  // replicas_in_lockstep: the failed step ends the round for everyone
  // (ReplicaLosses, the others interrupted); a restarted worker is waited
  // for before the step stops counting as in flight.
  void LoseReplica(int worker, WorkerStub* remote, const absl::Status& status,
                   QueuedStep p);
  // Tells every worker but `worker` to stop waiting in its all-reduce.
  void InterruptOthers(int worker, const std::string& reason);
  // `worker` died in step `p`: it runs again (elsewhere, or on `worker`
  // once back) unless the job's error cancelled the queue meanwhile.
  void RerunAfterDeath(int worker, WorkerStub* remote,
                       const absl::Status& status, QueuedStep p);
  // `worker` leaves the job (`to`: kDraining or kRemoved): its queues go to
  // the active workers serving the fewest. Records the job's error when
  // no active worker is left or fewer than min_workers.
  void HandOver(int worker, MemberState to, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Tell(int worker, MemberState state, const std::string& note) const;
  void WakeAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for a failed worker to come back; past worker_recovery_timeout
  // removes it (remove_lost_workers) or fails the job.
  void RecoverWorker(int worker, WorkerStub* remote);
  // For a step that failed with `status` on `worker`, which still answers:
  // queues it again after a pause and returns true when the failure may
  // pass (step_retry_timeout); false when it is the job's error.
  bool RetryLater(int worker, const absl::Status& status, QueuedStep* p);
  void RecordError(absl::Status error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelQueued() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TakeError() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions options_;
  const int num_queues_;
  const std::unique_ptr<ReplicaLosses> replica_losses_;
  // Steps done and run again, and the rates: their own lock.
  StepTally tally_;
  // Replicas: the ring's members changed, and those that leave it at the
  // next TakeRing; their own lock, taken inside mu_ where both are.
  RingChanges ring_;

  // One concept: which thread runs which queued step now. The threads
  // wait on the queue, a step in flight ends in it or in the job's error,
  // and the error cancels what is queued, so these change together.
  mutable absl::Mutex mu_;
  // Grows as workers join; a worker's thread holds its own worker's pointer.
  std::vector<std::unique_ptr<WorkerStub>> workers_ ABSL_GUARDED_BY(mu_);
  // The queued steps, which worker serves which, and the staleness gate.
  StepQueue queue_ ABSL_GUARDED_BY(mu_);
  // Per worker, what its thread waits on for a step: a worker is woken
  // for what it may take (queue_ says whom), not at every change of the
  // queue. A deque: a worker's CondVar stays put as others join.
  std::deque<absl::CondVar> wake_ ABSL_GUARDED_BY(mu_);
  int64_t inflight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_CLUSTER_COORDINATOR_H_
