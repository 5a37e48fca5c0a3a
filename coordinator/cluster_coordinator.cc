#include "coordinator/cluster_coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/replica_losses.h"
#include "coordinator/step_failures.h"
#include "coordinator/taken_steps.h"
#include "coordinator/worker_comeback.h"
#include "glog/logging.h"

namespace tessera {
ClusterCoordinator::ClusterCoordinator(
    std::vector<std::unique_ptr<WorkerStub>> workers,
    CoordinatorOptions options)
    : options_(std::move(options)),
      num_queues_(static_cast<int>(workers.size())),
      replica_losses_(std::make_unique<ReplicaLosses>()),
      tally_(num_queues_),
      queue_(
          num_queues_,
          StepQueue::Options{options_.steal_threshold, options_.max_staleness},
          // Called by queue_'s methods, under mu_.
          [this](int worker) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            if (worker == StepQueue::kEveryWorker) {
              WakeAll();
            } else {
              wake_[worker].Signal();
            }
          }) {
  absl::MutexLock lock(&mu_);
  for (int w = 0; w < num_queues_; ++w) {
    wake_.emplace_back();
    WorkerStub* remote = workers[w].get();
    workers_.push_back(std::move(workers[w]));
    threads_.emplace_back([this, w, remote] { WorkerLoop(w, remote); });
  }
}

ClusterCoordinator::~ClusterCoordinator() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    CancelQueued();
    WakeAll();
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

int ClusterCoordinator::num_workers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(workers_.size());
}

void ClusterCoordinator::Tell(int worker, MemberState state,
                              const std::string& note) const {
  if (options_.on_member_event) options_.on_member_event(worker, state, note);
}

int ClusterCoordinator::QueueForNewWorker() const {
  absl::MutexLock lock(&mu_);
  return queue_.QueueForNewWorker();
}

absl::StatusOr<int> ClusterCoordinator::AddSeat(
    std::unique_ptr<WorkerStub> worker) {
  absl::MutexLock lock(&mu_);
  // A job recovering from an error takes it: it steps once it serves.
  if (stopping_) {
    return absl::FailedPreconditionError(
        "the job is stopping: no worker can join it now");
  }
  const int w = queue_.AddWorker();
  tally_.AddWorker();
  wake_.emplace_back();
  WorkerStub* remote = worker.get();
  workers_.push_back(std::move(worker));
  threads_.emplace_back([this, w, remote] { WorkerLoop(w, remote); });
  return w;
}

absl::Status ClusterCoordinator::Serve(int worker, int queue) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      return absl::FailedPreconditionError(
          "the job is stopping: no worker can join it now");
    }
    if (!error_.ok()) {
      // Steps are cancelled until the job has recovered: ask again then.
      return absl::UnavailableError(
          "the job is recovering from a failure; the worker joins after it");
    }
    if (options_.replicas_in_lockstep) {
      // A replica takes exactly its part of each round: a queue of its
      // own, which the rounds fill once the ring has it (TakeRing).
      queue = queue_.AddQueue();
      ring_.MarkChanged();
    }
    queue_.Activate(worker, queue);
  }
  LOG(INFO) << "worker " << worker << " joined, serving "
            << (options_.replicas_in_lockstep ? "its place in the ring"
                                              : absl::StrCat("shard ", queue));
  return absl::OkStatus();
}

std::vector<ClusterCoordinator::RingSeat> ClusterCoordinator::TakeRing() {
  absl::MutexLock lock(&mu_);
  for (int w : ring_.Take()) {
    if (queue_.state(w) != MemberState::kActive) continue;
    // Its queue is empty: no round is in flight. The worker it goes to
    // keeps its own queue first, the one its parts are scheduled to.
    HandOver(w, MemberState::kDraining, "drained");
    wake_[w].Signal();  // it holds no step: it has drained
  }
  std::vector<RingSeat> ring;
  for (int w = 0; w < queue_.num_workers(); ++w) {
    if (queue_.state(w) != MemberState::kActive || queue_.serves(w).empty()) {
      continue;
    }
    ring.push_back({w, queue_.serves(w).front()});
  }
  return ring;
}

absl::Status ClusterCoordinator::Leave(int worker, MemberState to) {
  absl::MutexLock lock(&mu_);
  const MemberState from = queue_.state(worker);
  if (!MemberStateMayBecome(from, to)) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " ",
                     from == MemberState::kDraining
                         ? "is already draining"
                         : "has already left (drained or removed)"));
  }
  if (from == MemberState::kJoining) {
    // It served nothing, and the active workers are as many as before.
    queue_.set_state(worker, to);
  } else if (options_.replicas_in_lockstep && to == MemberState::kDraining) {
    // Its parts of the rounds already scheduled are its own to run (no
    // other member may take a second part of a round): it leaves the ring
    // at the next round boundary (TakeRing), with nothing queued.
    ring_.Drain(worker);
    return absl::OkStatus();
  } else {
    HandOver(worker, to, to == MemberState::kDraining ? "drained" : "left");
  }
  wake_[worker].Signal();
  return absl::OkStatus();
}

void ClusterCoordinator::HandOver(int worker, MemberState to,
                                  const std::string& why) {
  for (const StepQueue::Handover& h : queue_.Leave(worker, to)) {
    LOG(INFO) << "shard " << h.queue << "'s steps go to worker " << h.to
              << " (worker " << worker << " " << why << ")";
  }
  const int floor = std::max(1, options_.min_workers);
  if (queue_.ActiveWorkers() < floor) {
    RecordError(absl::UnavailableError(absl::StrCat(
        "worker ", worker, " ", why, " and the job has ",
        queue_.ActiveWorkers(), " worker(s) left, fewer than its minimum of ",
        floor, " (--min_workers): it cannot go on")));
  }
}

absl::StatusOr<StepFuture> ClusterCoordinator::Schedule(StepRequest request,
                                                        int preferred_worker) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return TakeError();
  QueuedStep p;
  p.request = std::move(request);
  p.queue = preferred_worker < queue_.num_queues() ? preferred_worker : -1;
  StepFuture future = p.future;
  queue_.Enqueue(std::move(p), /*front=*/false);
  return future;
}

absl::Status ClusterCoordinator::Join() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ClusterCoordinator* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
        return !self->error_.ok() ||
               (self->queue_.size() == 0 && self->inflight_ == 0);
      },
      this));
  if (error_.ok()) return absl::OkStatus();
  // As TF: let the steps in flight finish, then report.
  mu_.Await(absl::Condition(
      +[](ClusterCoordinator* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
        return self->inflight_ == 0;
      },
      this));
  return TakeError();
}

void ClusterCoordinator::Abort(absl::Status error) {
  absl::MutexLock lock(&mu_);
  RecordError(std::move(error));
}

std::vector<std::pair<int64_t, bool>> ClusterCoordinator::worker_progress()
    const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, bool>> progress;
  for (int w = 0; w < queue_.num_workers(); ++w) {
    progress.emplace_back(queue_.progress(w),
                          queue_.down(w) || MemberStateIsGone(queue_.state(w)));
  }
  return progress;
}

bool ClusterCoordinator::gone(int worker) const {
  absl::MutexLock lock(&mu_);
  return MemberStateIsGone(queue_.state(worker));
}

bool ClusterCoordinator::AwaitWorkersBack(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto over = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !error_.ok() || !queue_.AnyDown();
  };
  mu_.AwaitWithTimeout(absl::Condition(&over), timeout);
  return !queue_.AnyDown();
}

int64_t ClusterCoordinator::max_lead() const {
  absl::MutexLock lock(&mu_);
  return queue_.max_lead();
}

void ClusterCoordinator::WakeAll() {
  for (absl::CondVar& wake : wake_) wake.Signal();
}

bool ClusterCoordinator::Take(int worker, std::vector<QueuedStep>* out) {
  out->clear();
  absl::MutexLock lock(&mu_);
  // Woken by what may give it a step (a step queued for it or for anyone,
  // a queue that became stealable, its own return, a stop; with a
  // staleness bound, any finished step). The timeout bounds what a
  // wake-up missed could cost.
  while (!stopping_ && (queue_.state(worker) == MemberState::kJoining ||
                        (queue_.state(worker) == MemberState::kActive &&
                         !queue_.HasWork(worker)))) {
    wake_[worker].WaitWithTimeout(&mu_, absl::Seconds(1));
  }
  if (stopping_ || queue_.state(worker) != MemberState::kActive) return false;
  queue_.Take(worker, options_.steps_per_call, out);
  inflight_ += static_cast<int64_t>(out->size());
  return true;
}

void ClusterCoordinator::WorkerLoop(int worker, WorkerStub* remote) {
  std::vector<QueuedStep> taken;
  StepsRequest request;  // reused: one copy of each step's request
  while (Take(worker, &taken)) {
    size_t finished = 0;
    const absl::Status status =
        RunTaken(worker, remote, &taken, &request, &finished);
    {
      absl::MutexLock lock(&mu_);
      // An idle worker with nothing queued no longer holds the others back.
      queue_.SetBusy(worker, false);
      queue_.WakeFreed();
    }
    if (finished == taken.size()) continue;
    RequeueAfter(&taken, finished + 1);
    HandleFailure(worker, remote, status, std::move(taken[finished]));
  }
  EndDrain(worker);
}

absl::Status ClusterCoordinator::RunTaken(int worker, WorkerStub* remote,
                                          std::vector<QueuedStep>* taken,
                                          StepsRequest* request,
                                          size_t* finished) {
  // Counts a finished step at once, so progress and a later failure see it
  // as done.
  auto done = [&](size_t i, StepResponse response) {
    {
      absl::MutexLock lock(&mu_);
      queue_.Finish(worker);
    }
    tally_.Finished(worker, absl::Now());
    (*taken)[i].future.Set(std::move(response));
    absl::MutexLock lock(&mu_);
    --inflight_;
    // The slowest worker's step may free the others: a worker held back
    // waits for the slowest to move, so only a move wakes them, and only
    // those it lets run (waking every worker on every step cost
    // O(workers^2) per step).
    queue_.WakeFreed();
  };
  return RunTakenSteps(worker, remote, *taken, request, done, finished);
}

void ClusterCoordinator::RequeueAfter(std::vector<QueuedStep>* taken,
                                      size_t first) {
  // They did not run: back to the front of the queue, in order, as if
  // never taken.
  absl::MutexLock lock(&mu_);
  for (size_t i = taken->size(); i-- > first;) {
    --inflight_;
    ReturnToQueue(std::move((*taken)[i]));
  }
}

bool ClusterCoordinator::ReturnToQueue(QueuedStep p) {
  if (!error_.ok() || stopping_) {
    // The queue was cancelled meanwhile (an abort, or another step's
    // error): a step queued again now would outlive the Join that a
    // recovery waits for, and push an old gradient after a restore.
    p.future.Set(CancelledAfterError(p.request.step()));
    return false;
  }
  queue_.Enqueue(std::move(p), /*front=*/true);
  return true;
}

void ClusterCoordinator::EndDrain(int worker) {
  // Its steps are over: a draining worker has drained.
  {
    absl::MutexLock lock(&mu_);
    if (queue_.state(worker) != MemberState::kDraining) return;
    queue_.set_state(worker, MemberState::kDrained);
  }
  LOG(INFO) << "worker " << worker << " drained";
  Tell(worker, MemberState::kDrained, "its steps are done");
}

void ClusterCoordinator::HandleFailure(int worker, WorkerStub* remote,
                                       const absl::Status& status,
                                       QueuedStep p) {
  if (options_.replicas_in_lockstep) {
    LoseReplica(worker, remote, status, std::move(p));
  } else if (remote->Probe() != WorkerHealth::kReady) {
    RerunAfterDeath(worker, remote, status, std::move(p));
  } else if (!RetryLater(worker, status, &p)) {
    p.future.Set(status);
    absl::MutexLock lock(&mu_);
    --inflight_;
    RecordError(status);
  }
}

void ClusterCoordinator::LoseReplica(int worker, WorkerStub* remote,
                                     const absl::Status& status, QueuedStep p) {
  const absl::Status lost = ReplicaLostError(p.request.step(), worker, status);
  LOG(ERROR) << lost.message();
  // Before the error and the future: whoever sees either may take the
  // loss.
  const bool first = replica_losses_->Lost();
  {
    absl::MutexLock lock(&mu_);
    RecordError(lost);
  }
  p.future.Set(lost);
  if (first) {
    // The others' all-reduce of this step would wait for this replica
    // until its deadline.
    InterruptOthers(worker, absl::StrCat("step ", p.request.step(),
                                         " failed on worker ", worker));
  }
  // The recovery restores every replica, the restarted one's too: it
  // must be back first (RecoverWorker gives it its configuration), so
  // the step counts as in flight, and Join waits, until it is.
  if (remote->Probe() != WorkerHealth::kReady) {
    replica_losses_->Restarted(worker);
    {
      absl::MutexLock lock(&mu_);
      queue_.SetDown(worker, true);
    }
    Tell(worker, MemberState::kDown, std::string(status.message()));
    RecoverWorker(worker, remote);
  }
  absl::MutexLock lock(&mu_);
  --inflight_;
}

void ClusterCoordinator::InterruptOthers(int worker,
                                         const std::string& reason) {
  std::vector<WorkerStub*> others;
  {
    absl::MutexLock lock(&mu_);
    for (size_t w = 0; w < workers_.size(); ++w) {
      if (static_cast<int>(w) != worker) others.push_back(workers_[w].get());
    }
  }
  for (WorkerStub* other : others) other->Interrupt(reason);
}

void ClusterCoordinator::RerunAfterDeath(int worker, WorkerStub* remote,
                                         const absl::Status& status,
                                         QueuedStep p) {
  {
    absl::MutexLock lock(&mu_);
    queue_.SetDown(worker, true);
    if (options_.max_staleness >= 0) WakeAll();
    --inflight_;
    const int64_t step = p.request.step();
    const bool again = ReturnToQueue(std::move(p));
    if (again) tally_.CountRerun(1);
    LOG(WARNING) << "worker " << worker << " failed during step " << step
                 << " (" << status << "); the step "
                 << (again ? "will run again" : "is cancelled");
  }
  Tell(worker, MemberState::kDown, std::string(status.message()));
  RecoverWorker(worker, remote);
}

bool ClusterCoordinator::RetryLater(int worker, const absl::Status& status,
                                    QueuedStep* p) {
  const std::optional<absl::Duration> pause =
      RetryPause(worker, status, options_.step_retry_timeout, p);
  if (!pause.has_value()) return false;
  absl::MutexLock lock(&mu_);
  // The pause ends early when the job is aborted or stopped meanwhile.
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](ClusterCoordinator* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
               self->mu_) { return self->stopping_ || !self->error_.ok(); },
          this),
      *pause);
  --inflight_;
  if (ReturnToQueue(std::move(*p))) tally_.CountRerun(1);
  return true;
}

void ClusterCoordinator::RecoverWorker(int worker, WorkerStub* remote) {
  const Comeback comeback = AwaitComeback(
      worker, remote, absl::Now() + options_.worker_recovery_timeout, [&] {
        absl::MutexLock lock(&mu_);
        if (stopping_) return true;
        if (queue_.state(worker) != MemberState::kDraining) return false;
        // Drained while down: it holds no step any more.
        queue_.SetDown(worker, false);
        return true;
      });
  if (comeback == Comeback::kGaveUp) return;
  if (comeback == Comeback::kBack) {
    LOG(INFO) << "worker " << worker << " is back";
    {
      absl::MutexLock lock(&mu_);
      queue_.SetDown(worker, false);
    }
    Tell(worker, MemberState::kActive, "back");
    return;
  }
  const std::string why =
      absl::StrCat("did not come back within ",
                   absl::FormatDuration(options_.worker_recovery_timeout));
  if (options_.remove_lost_workers) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || queue_.state(worker) != MemberState::kActive) return;
      HandOver(worker, MemberState::kRemoved,
               absl::StrCat(why, " and was removed"));
      // A replica: the round it failed runs again without it (the
      // survivors' ring re-formed by the repair), and the rounds after
      // have a part per member left (TakeRing).
      if (options_.replicas_in_lockstep) ring_.MarkChanged();
    }
    LOG(WARNING) << "worker " << worker << " " << why
                 << ": removed from the job, its steps go to the others";
    Tell(worker, MemberState::kRemoved, why);
    return;
  }
  absl::MutexLock lock(&mu_);
  RecordError(
      absl::UnavailableError(absl::StrCat("worker ", worker, " ", why)));
}

void ClusterCoordinator::RecordError(absl::Status error) {
  if (error_.ok()) {
    error_ = std::move(error);
    CancelQueued();
  }
}

void ClusterCoordinator::CancelQueued() {
  for (QueuedStep& p : queue_.Clear()) {
    p.future.Set(CancelledAfterError(p.request.step()));
  }
}

absl::Status ClusterCoordinator::TakeError() {
  absl::Status error = std::move(error_);
  error_ = absl::OkStatus();
  return error;
}

}  // namespace tessera
