#include "coordinator/cluster_coordinator.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/rpc/backoff.h"
#include "glog/logging.h"

namespace tessera {

ClusterCoordinator::ClusterCoordinator(
    std::vector<std::unique_ptr<WorkerStub>> workers,
    CoordinatorOptions options)
    : options_(std::move(options)),
      num_queues_(static_cast<int>(workers.size())) {
  absl::MutexLock lock(&mu_);
  own_.resize(num_queues_);
  stealable_.assign(num_queues_, false);
  servers_.resize(num_queues_);
  for (int w = 0; w < num_queues_; ++w) {
    servers_[w] = {w};
    serves_.push_back({w});
    presence_.push_back(Presence::kActive);
    down_.push_back(false);
    busy_.push_back(false);
    finished_.push_back(0);
    credit_.push_back(0);
    finish_times_.emplace_back();
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

void ClusterCoordinator::Tell(int worker, MemberEvent event,
                              const std::string& note) const {
  if (options_.on_member_event) options_.on_member_event(worker, event, note);
}

int ClusterCoordinator::LiveServers(int queue) const {
  int n = 0;
  for (int w : servers_[queue]) n += presence_[w] != Presence::kGone;
  return n;
}

int ClusterCoordinator::ActiveWorkers() const {
  int n = 0;
  for (Presence p : presence_) n += p == Presence::kActive;
  return n;
}

int ClusterCoordinator::QueueForNewWorker() const {
  absl::MutexLock lock(&mu_);
  int best = 0;
  for (int q = 1; q < num_queues_; ++q) {
    const int servers = LiveServers(q), best_servers = LiveServers(best);
    if (servers < best_servers ||
        (servers == best_servers && own_[q].size() > own_[best].size())) {
      best = q;
    }
  }
  return best;
}

absl::StatusOr<int> ClusterCoordinator::AddWorker(
    std::unique_ptr<WorkerStub> worker) {
  absl::MutexLock lock(&mu_);
  // A job recovering from an error takes it: it steps once Activate.
  if (stopping_) {
    return absl::FailedPreconditionError(
        "the job is stopping: no worker can join it now");
  }
  const int w = static_cast<int>(workers_.size());
  presence_.push_back(Presence::kJoining);
  down_.push_back(false);
  busy_.push_back(false);
  finished_.push_back(0);
  credit_.push_back(0);
  finish_times_.emplace_back();
  wake_.emplace_back();
  serves_.emplace_back();
  WorkerStub* remote = worker.get();
  workers_.push_back(std::move(worker));
  threads_.emplace_back([this, w, remote] { WorkerLoop(w, remote); });
  return w;
}

absl::Status ClusterCoordinator::Activate(int worker, int queue) {
  {
    absl::MutexLock lock(&mu_);
    if (worker < 0 || worker >= static_cast<int>(workers_.size()) ||
        presence_[worker] != Presence::kJoining) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", worker, " is not joining"));
    }
    if (queue < 0 || queue >= num_queues_) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard ", queue, " is not in [0, ", num_queues_, ")"));
    }
    if (stopping_) {
      return absl::FailedPreconditionError(
          "the job is stopping: no worker can join it now");
    }
    if (!error_.ok()) {
      // Steps are cancelled until the job has recovered: ask again then.
      return absl::UnavailableError(
          "the job is recovering from a failure; the worker joins after it");
    }
    // With a staleness bound a newcomer counts as level with the slowest
    // worker, so that it neither holds the others back nor runs ahead.
    int64_t slowest = -1;
    for (int x = 0; x < static_cast<int>(workers_.size()); ++x) {
      if (presence_[x] != Presence::kActive || down_[x]) continue;
      if (slowest < 0 || finished_[x] < slowest) slowest = finished_[x];
    }
    if (options_.max_staleness >= 0) {
      credit_[worker] = std::max<int64_t>(0, slowest);
      finished_[worker] = credit_[worker];
    }
    presence_[worker] = Presence::kActive;
    serves_[worker] = {queue};
    servers_[queue].push_back(worker);
    UpdateStealable(queue);
    wake_[worker].Signal();
  }
  LOG(INFO) << "worker " << worker << " joined, serving shard " << queue;
  Tell(worker, MemberEvent::kJoined, absl::StrCat("serves shard ", queue));
  return absl::OkStatus();
}

void ClusterCoordinator::Forget(int worker) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(workers_.size()) ||
      presence_[worker] != Presence::kJoining) {
    return;
  }
  presence_[worker] = Presence::kGone;
  wake_[worker].Signal();
}

absl::Status ClusterCoordinator::CheckDrain(int worker) const {
  const int n = static_cast<int>(workers_.size());
  if (worker < 0 || worker >= n) {
    return absl::NotFoundError(absl::StrCat("there is no worker ", worker,
                                            " (the job has workers 0 to ",
                                            n - 1, ")"));
  }
  if (presence_[worker] != Presence::kActive) {
    const Presence p = presence_[worker];
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " ",
                     p == Presence::kJoining    ? "is still joining"
                     : p == Presence::kDraining ? "is already draining"
                                                : "has already left (drained "
                                                  "or removed)"));
  }
  const int floor = std::max(1, options_.min_workers);
  if (ActiveWorkers() - 1 < floor) {
    return absl::FailedPreconditionError(absl::StrCat(
        "draining worker ", worker, " would leave ", ActiveWorkers() - 1,
        " worker(s), fewer than the job's minimum of ", floor,
        " (--min_workers)"));
  }
  return absl::OkStatus();
}

absl::Status ClusterCoordinator::Drain(int worker) {
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckDrain(worker); !s.ok()) return s;
  }
  // Told before the worker can see it: an idle worker drains at once, and
  // its kDrained must come after this.
  LOG(INFO) << "worker " << worker << " is draining";
  Tell(worker, MemberEvent::kDraining, "finishes the steps it holds");
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckDrain(worker); !s.ok()) return s;  // raced
  presence_[worker] = Presence::kDraining;
  HandOver(worker, "drained");
  wake_[worker].Signal();
  return absl::OkStatus();
}

void ClusterCoordinator::HandOver(int worker, const std::string& why) {
  const std::vector<int> queues = std::move(serves_[worker]);
  serves_[worker].clear();
  for (int q : queues) {
    std::vector<int>& servers = servers_[q];
    servers.erase(std::remove(servers.begin(), servers.end(), worker),
                  servers.end());
    bool served = false;
    for (int s : servers) served |= presence_[s] == Presence::kActive;
    if (!served) {
      // The active worker serving the fewest queues takes it over.
      int to = -1;
      for (int w = 0; w < static_cast<int>(workers_.size()); ++w) {
        if (presence_[w] != Presence::kActive) continue;
        if (to < 0 || serves_[w].size() < serves_[to].size()) to = w;
      }
      if (to >= 0) {
        servers.push_back(to);
        serves_[to].push_back(q);
        LOG(INFO) << "shard " << q << "'s steps go to worker " << to
                  << " (worker " << worker << " " << why << ")";
        wake_[to].Signal();
      }
    }
    UpdateStealable(q);
  }
  const int floor = std::max(1, options_.min_workers);
  if (ActiveWorkers() < floor) {
    RecordError(absl::UnavailableError(absl::StrCat(
        "worker ", worker, " ", why, " and the job has ", ActiveWorkers(),
        " worker(s) left, fewer than its minimum of ", floor,
        " (--min_workers): it cannot go on")));
  }
}

absl::StatusOr<StepFuture> ClusterCoordinator::Schedule(StepRequest request,
                                                        int preferred_worker) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return TakeError();
  Pending p;
  p.request = std::move(request);
  p.preferred = preferred_worker < num_queues_ ? preferred_worker : -1;
  StepFuture future = p.future;
  Enqueue(std::move(p), /*front=*/false);
  return future;
}

absl::Status ClusterCoordinator::Join() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ClusterCoordinator* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
        return !self->error_.ok() ||
               (self->queued_ == 0 && self->inflight_ == 0);
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

int64_t ClusterCoordinator::steps_done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

std::vector<std::pair<int64_t, bool>> ClusterCoordinator::worker_progress()
    const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, bool>> progress;
  for (size_t w = 0; w < workers_.size(); ++w) {
    progress.emplace_back(finished_[w] - credit_[w],
                          down_[w] || presence_[w] == Presence::kGone);
  }
  return progress;
}

int64_t ClusterCoordinator::steps_rerun() const {
  absl::MutexLock lock(&mu_);
  return rerun_;
}

int64_t ClusterCoordinator::max_lead() const {
  absl::MutexLock lock(&mu_);
  return max_lead_;
}

int64_t ClusterCoordinator::Slowest(int except) const {
  const bool any_unassigned = !any_.empty();
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (int w = 0; w < static_cast<int>(workers_.size()); ++w) {
    if (w == except || down_[w] || presence_[w] == Presence::kGone) continue;
    if (busy_[w] || any_unassigned) {
      slowest = std::min(slowest, finished_[w]);
      continue;
    }
    bool queued = false;
    for (int q : serves_[w]) queued |= !own_[q].empty();
    if (queued) {
      slowest = std::min(slowest, finished_[w]);
    }
  }
  return slowest;
}

int64_t ClusterCoordinator::Lead(int worker) const {
  return finished_[worker] - std::min(finished_[worker], Slowest(worker));
}

bool ClusterCoordinator::HasOwn(int worker) const {
  if (!any_.empty()) return true;
  for (int q : serves_[worker]) {
    if (!own_[q].empty()) return true;
  }
  return false;
}

bool ClusterCoordinator::HasWork(int worker) const {
  if (down_[worker] || presence_[worker] != Presence::kActive) return false;
  if (options_.max_staleness >= 0 && Lead(worker) > options_.max_staleness) {
    return false;
  }
  // A stealable queue is another worker's: this one has none of its own
  // then, or HasOwn already holds.
  return HasOwn(worker) || stealable_count_ > 0;
}

bool ClusterCoordinator::Stealable(int queue) const {
  const std::deque<Pending>& q = own_[queue];
  if (q.empty()) return false;
  bool served = false;  // by a worker that is up
  for (int w : servers_[queue]) {
    served |= presence_[w] == Presence::kActive && !down_[w];
  }
  return !served ||
         q.size() >= static_cast<size_t>(std::max(0, options_.steal_threshold));
}

void ClusterCoordinator::UpdateStealable(int queue) {
  const bool now = Stealable(queue);
  if (now == stealable_[queue]) return;
  stealable_[queue] = now;
  stealable_count_ += now ? 1 : -1;
  if (now) WakeAll();
}

void ClusterCoordinator::UpdateStealableOf(int worker) {
  for (int q : serves_[worker]) UpdateStealable(q);
}

void ClusterCoordinator::WakeAll() {
  for (absl::CondVar& wake : wake_) wake.Signal();
}

void ClusterCoordinator::Enqueue(Pending p, bool front) {
  p.seq = front ? front_seq_-- : back_seq_++;
  const int queue = p.preferred;
  std::deque<Pending>& q = queue < 0 ? any_ : own_[queue];
  if (front) {
    q.push_front(std::move(p));
  } else {
    q.push_back(std::move(p));
  }
  ++queued_;
  if (queue < 0) {
    WakeAll();  // anyone's
    return;
  }
  for (int w : servers_[queue]) wake_[w].Signal();
  UpdateStealable(queue);
}

ClusterCoordinator::Pending ClusterCoordinator::PopOwn(int worker) {
  // The oldest of its queues' and the unassigned steps.
  int from = -1;  // -1: any_
  for (int q : serves_[worker]) {
    if (own_[q].empty()) continue;
    const std::deque<Pending>& best = from < 0 ? any_ : own_[from];
    if (best.empty() || own_[q].front().seq < best.front().seq) from = q;
  }
  std::deque<Pending>& q = from < 0 ? any_ : own_[from];
  Pending p = std::move(q.front());
  q.pop_front();
  --queued_;
  if (from >= 0) UpdateStealable(from);
  return p;
}

bool ClusterCoordinator::Take(int worker, std::vector<Pending>* out) {
  out->clear();
  absl::MutexLock lock(&mu_);
  // Woken by what may give it a step (a step queued for it or for anyone,
  // a queue that became stealable, its own return, a stop; with a
  // staleness bound, any finished step). The timeout bounds what a
  // wake-up missed could cost.
  while (!stopping_ &&
         (presence_[worker] == Presence::kJoining ||
          (presence_[worker] == Presence::kActive && !HasWork(worker)))) {
    wake_[worker].WaitWithTimeout(&mu_, absl::Seconds(1));
  }
  if (stopping_ || presence_[worker] != Presence::kActive) return false;
  // Own (or unassigned) steps first, in order; else the oldest stealable.
  const bool own = HasOwn(worker);
  if (own) {
    out->push_back(PopOwn(worker));
  } else {
    int from = -1;
    for (int q = 0; q < num_queues_; ++q) {
      if (stealable_[q] &&
          (from < 0 || own_[q].front().seq < own_[from].front().seq)) {
        from = q;
      }
    }
    out->push_back(std::move(own_[from].front()));
    own_[from].pop_front();
    --queued_;
    UpdateStealable(from);
  }
  ++inflight_;
  if (options_.max_staleness >= 0) {
    max_lead_ = std::max(max_lead_, Lead(worker));
  }
  // More of its own steps, in queue order, in the same call: only without
  // a staleness bound, which counts steps one at a time.
  if (own && options_.max_staleness < 0) {
    while (static_cast<int>(out->size()) < options_.steps_per_call &&
           HasOwn(worker)) {
      out->push_back(PopOwn(worker));
      ++inflight_;
    }
  }
  busy_[worker] = true;
  return true;
}

void ClusterCoordinator::WorkerLoop(int worker, WorkerStub* remote) {
  std::vector<Pending> taken;
  StepsRequest request;  // reused: one copy of each step's request
  while (Take(worker, &taken)) {
    size_t finished = 0;
    // Counts a finished step at once, so progress and a later failure see
    // it as done.
    auto done = [&](size_t i, StepResponse response) {
      int64_t slowest = 0;
      {
        absl::MutexLock lock(&mu_);
        if (options_.max_staleness >= 0) slowest = Slowest();
        ++finished_[worker];
        std::deque<absl::Time>& times = finish_times_[worker];
        times.push_back(absl::Now());
        if (times.size() > kRateSamples) times.pop_front();
      }
      taken[i].future.Set(std::move(response));
      finished = i + 1;
      absl::MutexLock lock(&mu_);
      --inflight_;
      ++done_;
      // The slowest worker's step may free the others: a worker held back
      // waits for the slowest to move, so only a move wakes them (waking
      // every worker on every step cost O(workers^2) per step).
      if (options_.max_staleness >= 0 && Slowest() != slowest) WakeAll();
    };
    absl::Status status;
    if (taken.size() == 1) {
      StepResponse response;
      status = remote->RunStep(taken[0].request, &response);
      if (status.ok()) done(0, std::move(response));
    } else {
      request.clear_steps();
      for (const Pending& p : taken) *request.add_steps() = p.request;
      status = remote->RunSteps(request, [&](int i, StepResponse response) {
        // Only in order, and only each step once.
        if (static_cast<size_t>(i) == finished && finished < taken.size()) {
          done(finished, std::move(response));
        }
      });
      if (status.ok() && finished != taken.size()) {
        status = absl::InternalError(
            absl::StrCat("worker ", worker, " finished ", finished, " of ",
                         taken.size(), " steps and reported no error"));
      }
    }
    {
      absl::MutexLock lock(&mu_);
      // An idle worker with nothing queued no longer holds the others back.
      const int64_t slowest =
          options_.max_staleness >= 0 ? Slowest() : int64_t{0};
      busy_[worker] = false;
      if (options_.max_staleness >= 0 && Slowest() != slowest) WakeAll();
    }
    if (finished == taken.size()) continue;
    {
      // The steps after the failed one did not run: back to the front of
      // the queue, in order, as if never taken.
      absl::MutexLock lock(&mu_);
      for (size_t i = taken.size(); i-- > finished + 1;) {
        --inflight_;
        if (error_.ok() && !stopping_) {
          Enqueue(std::move(taken[i]), /*front=*/true);
        } else {
          taken[i].future.Set(absl::CancelledError(
              absl::StrCat("step ", taken[i].request.step(),
                           " cancelled after an earlier error")));
        }
      }
    }
    HandleFailure(worker, remote, status, std::move(taken[finished]));
  }
  // Its steps are over: a draining worker has drained.
  bool drained = false;
  {
    absl::MutexLock lock(&mu_);
    if (presence_[worker] == Presence::kDraining) {
      presence_[worker] = Presence::kGone;
      drained = true;
    }
  }
  if (drained) {
    LOG(INFO) << "worker " << worker << " drained";
    Tell(worker, MemberEvent::kDrained, "its steps are done");
  }
}

void ClusterCoordinator::HandleFailure(int worker, WorkerStub* remote,
                                       const absl::Status& status, Pending p) {
  if (options_.replicas_in_lockstep) {
    const absl::Status lost = absl::AbortedError(absl::StrCat(
        "step ", p.request.step(), " failed on worker ", worker, " (",
        status.message(), "): its replica missed a step the others made, so ",
        "the round runs again from the survivors' replica or the job goes "
        "back to its last checkpoint; without checkpoints (--checkpoint_dir) "
        "the job stops"));
    LOG(ERROR) << lost.message();
    bool first = false;
    {
      // Before the future: whoever sees the error may ask TakeReplicaLoss.
      absl::MutexLock lock(&mu_);
      first = !replica_lost_;
      replica_lost_ = true;
      RecordError(lost);
    }
    p.future.Set(lost);
    if (first) {
      // The others' all-reduce of this step would wait for this replica
      // until its deadline.
      const std::string reason =
          absl::StrCat("step ", p.request.step(), " failed on worker ", worker);
      std::vector<WorkerStub*> others;
      {
        absl::MutexLock lock(&mu_);
        for (size_t w = 0; w < workers_.size(); ++w) {
          if (static_cast<int>(w) != worker)
            others.push_back(workers_[w].get());
        }
      }
      for (WorkerStub* other : others) other->Interrupt(reason);
    }
    // The recovery restores every replica, the restarted one's too: it
    // must be back first (RecoverWorker gives it its configuration), so
    // the step counts as in flight, and Join waits, until it is.
    if (remote->Probe() != WorkerHealth::kReady) {
      {
        absl::MutexLock lock(&mu_);
        down_[worker] = true;
        restarted_replicas_.insert(worker);
        UpdateStealableOf(worker);
      }
      Tell(worker, MemberEvent::kDown, std::string(status.message()));
      RecoverWorker(worker, remote);
    }
    absl::MutexLock lock(&mu_);
    --inflight_;
    return;
  }
  if (remote->Probe() != WorkerHealth::kReady) {
    {
      absl::MutexLock lock(&mu_);
      down_[worker] = true;
      UpdateStealableOf(worker);
      if (options_.max_staleness >= 0) WakeAll();
      --inflight_;
      const bool again = error_.ok() && !stopping_;
      LOG(WARNING) << "worker " << worker << " failed during step "
                   << p.request.step() << " (" << status << "); the step "
                   << (again ? "will run again" : "is cancelled");
      if (again) {
        ++rerun_;
        Enqueue(std::move(p), /*front=*/true);
      } else {
        // The queue was cancelled meanwhile (an abort, or another step's
        // error): a step queued again now would outlive the Join that
        // recovery waits for, and push an old gradient after a restore.
        p.future.Set(absl::CancelledError(absl::StrCat(
            "step ", p.request.step(), " cancelled after an earlier error")));
      }
    }
    Tell(worker, MemberEvent::kDown, std::string(status.message()));
    RecoverWorker(worker, remote);
    return;
  }
  if (RetryLater(worker, status, &p)) return;
  p.future.Set(status);
  absl::MutexLock lock(&mu_);
  --inflight_;
  RecordError(status);
}

bool ClusterCoordinator::RetryLater(int worker, const absl::Status& status,
                                    Pending* p) {
  if (!absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) {
    return false;
  }
  const absl::Time now = absl::Now();
  if (p->first_failure == absl::InfiniteFuture()) p->first_failure = now;
  if (now - p->first_failure >= options_.step_retry_timeout) return false;
  const absl::Duration pause = p->backoff.Next();
  LOG(WARNING) << "step " << p->request.step() << " failed on worker " << worker
               << ", which still answers (" << status
               << "); running it again in " << absl::FormatDuration(pause)
               << " (retrying for up to "
               << absl::FormatDuration(options_.step_retry_timeout) << ")";
  absl::MutexLock lock(&mu_);
  // The pause ends early when the job is aborted or stopped meanwhile.
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](ClusterCoordinator* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
               self->mu_) { return self->stopping_ || !self->error_.ok(); },
          this),
      pause);
  --inflight_;
  if (!error_.ok() || stopping_) {
    // As for a dead worker's step: queued now, it would outlive the Join
    // that a recovery waits for.
    p->future.Set(absl::CancelledError(absl::StrCat(
        "step ", p->request.step(), " cancelled after an earlier error")));
    return true;
  }
  ++rerun_;
  Enqueue(std::move(*p), /*front=*/true);
  return true;
}

void ClusterCoordinator::RecoverWorker(int worker, WorkerStub* remote) {
  const absl::Time deadline = absl::Now() + options_.worker_recovery_timeout;
  Backoff backoff;
  while (absl::Now() < deadline) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      if (presence_[worker] == Presence::kDraining) {
        // Drained while down: it holds no step any more.
        down_[worker] = false;
        return;
      }
    }
    const WorkerHealth health = remote->Probe();
    if (health != WorkerHealth::kDown) {
      absl::Status restored = health == WorkerHealth::kLostState
                                  ? remote->Restore()
                                  : absl::OkStatus();
      if (restored.ok()) {
        LOG(INFO) << "worker " << worker << " is back";
        {
          absl::MutexLock lock(&mu_);
          down_[worker] = false;
          UpdateStealableOf(worker);
        }
        Tell(worker, MemberEvent::kBack, "");
        return;
      }
      LOG(WARNING) << "worker " << worker << " answers but cannot be "
                   << "restored yet: " << restored;
    }
    absl::SleepFor(backoff.Next());
  }
  const std::string why =
      absl::StrCat("did not come back within ",
                   absl::FormatDuration(options_.worker_recovery_timeout));
  if (options_.remove_lost_workers && !options_.replicas_in_lockstep) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || presence_[worker] != Presence::kActive) return;
      presence_[worker] = Presence::kGone;
      down_[worker] = false;
      HandOver(worker, absl::StrCat(why, " and was removed"));
    }
    LOG(WARNING) << "worker " << worker << " " << why
                 << ": removed from the job, its steps go to the others";
    Tell(worker, MemberEvent::kRemoved, why);
    return;
  }
  absl::MutexLock lock(&mu_);
  RecordError(
      absl::UnavailableError(absl::StrCat("worker ", worker, " ", why)));
}

bool ClusterCoordinator::TakeReplicaLoss() {
  absl::MutexLock lock(&mu_);
  restarted_replicas_.clear();
  return std::exchange(replica_lost_, false);
}

std::vector<int> ClusterCoordinator::restarted_replicas() const {
  absl::MutexLock lock(&mu_);
  return {restarted_replicas_.begin(), restarted_replicas_.end()};
}

void ClusterCoordinator::CountRerun(int64_t steps) {
  absl::MutexLock lock(&mu_);
  rerun_ += steps;
}

void ClusterCoordinator::RecordError(absl::Status error) {
  if (error_.ok()) {
    error_ = std::move(error);
    CancelQueued();
  }
}

void ClusterCoordinator::CancelQueued() {
  auto cancel = [](std::deque<Pending>& q) {
    for (Pending& p : q) {
      p.future.Set(absl::CancelledError(absl::StrCat(
          "step ", p.request.step(), " cancelled after an earlier error")));
    }
    q.clear();
  };
  for (std::deque<Pending>& q : own_) cancel(q);
  cancel(any_);
  queued_ = 0;
  stealable_.assign(num_queues_, false);
  stealable_count_ = 0;
}

absl::Status ClusterCoordinator::TakeError() {
  absl::Status error = std::move(error_);
  error_ = absl::OkStatus();
  return error;
}

std::vector<double> ClusterCoordinator::steps_per_second(
    absl::Duration window) const {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  std::vector<double> rates;
  for (const std::deque<absl::Time>& times : finish_times_) {
    // Steps finished within the window; when more than the samples kept
    // finished in it, the rate over the samples' own span.
    const auto first =
        std::lower_bound(times.begin(), times.end(), now - window);
    const int64_t n = times.end() - first;
    absl::Duration span = window;
    if (times.size() == kRateSamples && first == times.begin()) {
      span = now - times.front();
    }
    rates.push_back(n / std::max(1e-9, absl::ToDoubleSeconds(span)));
  }
  return rates;
}

}  // namespace tessera
