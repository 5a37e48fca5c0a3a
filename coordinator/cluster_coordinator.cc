#include "coordinator/cluster_coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rpc/backoff.h"
#include "glog/logging.h"

namespace tessera {

ClusterCoordinator::ClusterCoordinator(
    std::vector<std::unique_ptr<WorkerStub>> workers,
    CoordinatorOptions options)
    : workers_(std::move(workers)),
      options_(options),
      wake_(new absl::CondVar[workers_.size()]) {
  {
    absl::MutexLock lock(&mu_);
    own_.resize(workers_.size());
    stealable_.assign(workers_.size(), false);
    down_.assign(workers_.size(), false);
    busy_.assign(workers_.size(), false);
    finished_.assign(workers_.size(), 0);
    finish_times_.resize(workers_.size());
  }
  for (int w = 0; w < num_workers(); ++w) {
    threads_.emplace_back([this, w] { WorkerLoop(w); });
  }
}

ClusterCoordinator::~ClusterCoordinator() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    CancelQueued();
    WakeAll();
  }
  for (std::thread& t : threads_) t.join();
}

absl::StatusOr<StepFuture> ClusterCoordinator::Schedule(StepRequest request,
                                                        int preferred_worker) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return TakeError();
  Pending p;
  p.request = std::move(request);
  p.preferred = preferred_worker < num_workers() ? preferred_worker : -1;
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
    progress.emplace_back(finished_[w], down_[w]);
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

int64_t ClusterCoordinator::Lead(int worker) const {
  const bool any_unassigned = !any_.empty();
  int64_t slowest = finished_[worker];
  for (int w = 0; w < num_workers(); ++w) {
    if (w == worker || down_[w]) continue;
    if (busy_[w] || !own_[w].empty() || any_unassigned) {
      slowest = std::min(slowest, finished_[w]);
    }
  }
  return finished_[worker] - slowest;
}

bool ClusterCoordinator::HasOwn(int worker) const {
  return !own_[worker].empty() || !any_.empty();
}

bool ClusterCoordinator::HasWork(int worker) const {
  if (down_[worker]) return false;
  if (options_.max_staleness >= 0 && Lead(worker) > options_.max_staleness) {
    return false;
  }
  // A stealable queue is another worker's: this one has none of its own
  // then, or HasOwn already holds.
  return HasOwn(worker) || stealable_count_ > 0;
}

bool ClusterCoordinator::Stealable(int worker) const {
  const std::deque<Pending>& q = own_[worker];
  return !q.empty() &&
         (down_[worker] || q.size() >= static_cast<size_t>(std::max(
                                           0, options_.steal_threshold)));
}

void ClusterCoordinator::UpdateStealable(int worker) {
  const bool now = Stealable(worker);
  if (now == stealable_[worker]) return;
  stealable_[worker] = now;
  stealable_count_ += now ? 1 : -1;
  if (now) WakeAll();
}

void ClusterCoordinator::WakeAll() {
  for (int w = 0; w < num_workers(); ++w) wake_[w].Signal();
}

void ClusterCoordinator::Enqueue(Pending p, bool front) {
  p.seq = front ? front_seq_-- : back_seq_++;
  const int worker = p.preferred;
  std::deque<Pending>& q = worker < 0 ? any_ : own_[worker];
  if (front) {
    q.push_front(std::move(p));
  } else {
    q.push_back(std::move(p));
  }
  ++queued_;
  if (worker < 0) {
    WakeAll();  // anyone's
    return;
  }
  wake_[worker].Signal();
  UpdateStealable(worker);
}

ClusterCoordinator::Pending ClusterCoordinator::PopOwn(int worker) {
  std::deque<Pending>& own = own_[worker];
  const bool from_own =
      !own.empty() && (any_.empty() || own.front().seq < any_.front().seq);
  std::deque<Pending>& q = from_own ? own : any_;
  Pending p = std::move(q.front());
  q.pop_front();
  --queued_;
  if (from_own) UpdateStealable(worker);
  return p;
}

bool ClusterCoordinator::Take(int worker, std::vector<Pending>* out) {
  out->clear();
  absl::MutexLock lock(&mu_);
  // Woken by what may give it a step (a step queued for it or for anyone,
  // a queue that became stealable, its own return, a stop; with a
  // staleness bound, any finished step). The timeout bounds what a
  // wake-up missed could cost.
  while (!stopping_ && !HasWork(worker)) {
    wake_[worker].WaitWithTimeout(&mu_, absl::Seconds(1));
  }
  if (stopping_) return false;
  // Own (or unassigned) steps first, in order; else the oldest stealable.
  const bool own = HasOwn(worker);
  if (own) {
    out->push_back(PopOwn(worker));
  } else {
    int from = -1;
    for (int w = 0; w < num_workers(); ++w) {
      if (stealable_[w] &&
          (from < 0 || own_[w].front().seq < own_[from].front().seq)) {
        from = w;
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

void ClusterCoordinator::WorkerLoop(int worker) {
  std::vector<Pending> taken;
  StepsRequest request;  // reused: one copy of each step's request
  while (Take(worker, &taken)) {
    size_t finished = 0;
    // Counts a finished step at once, so progress and a later failure see
    // it as done.
    auto done = [&](size_t i, StepResponse response) {
      {
        absl::MutexLock lock(&mu_);
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
      // The slowest worker's step may free the others.
      if (options_.max_staleness >= 0) WakeAll();
    };
    absl::Status status;
    if (taken.size() == 1) {
      StepResponse response;
      status = workers_[worker]->RunStep(taken[0].request, &response);
      if (status.ok()) done(0, std::move(response));
    } else {
      request.clear_steps();
      for (const Pending& p : taken) *request.add_steps() = p.request;
      status = workers_[worker]->RunSteps(
          request, [&](int i, StepResponse response) {
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
      busy_[worker] = false;
      if (options_.max_staleness >= 0) WakeAll();
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
    HandleFailure(worker, status, std::move(taken[finished]));
  }
}

void ClusterCoordinator::HandleFailure(int worker, const absl::Status& status,
                                       Pending p) {
  if (options_.replicas_in_lockstep) {
    const absl::Status lost = absl::AbortedError(absl::StrCat(
        "step ", p.request.step(), " failed on worker ", worker, " (",
        status.message(), "): its replica missed a step the others made, so ",
        "every replica goes back to the job's last checkpoint, or, without "
        "checkpoints (--checkpoint_dir), the job stops"));
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
      const std::string reason = absl::StrCat(
          "step ", p.request.step(), " failed on worker ", worker);
      for (size_t w = 0; w < workers_.size(); ++w) {
        if (static_cast<int>(w) != worker) workers_[w]->Interrupt(reason);
      }
    }
    // The recovery restores every replica, the restarted one's too: it
    // must be back first (RecoverWorker gives it its configuration), so
    // the step counts as in flight, and Join waits, until it is.
    if (workers_[worker]->Probe() != WorkerHealth::kReady) {
      {
        absl::MutexLock lock(&mu_);
        down_[worker] = true;
        UpdateStealable(worker);
      }
      RecoverWorker(worker);
    }
    absl::MutexLock lock(&mu_);
    --inflight_;
    return;
  }
  if (workers_[worker]->Probe() != WorkerHealth::kReady) {
    {
      absl::MutexLock lock(&mu_);
      down_[worker] = true;
      UpdateStealable(worker);
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
    RecoverWorker(worker);
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

void ClusterCoordinator::RecoverWorker(int worker) {
  const absl::Time deadline = absl::Now() + options_.worker_recovery_timeout;
  Backoff backoff;
  while (absl::Now() < deadline) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    const WorkerHealth health = workers_[worker]->Probe();
    if (health != WorkerHealth::kDown) {
      absl::Status restored = health == WorkerHealth::kLostState
                                  ? workers_[worker]->Restore()
                                  : absl::OkStatus();
      if (restored.ok()) {
        LOG(INFO) << "worker " << worker << " is back";
        absl::MutexLock lock(&mu_);
        down_[worker] = false;
        UpdateStealable(worker);
        return;
      }
      LOG(WARNING) << "worker " << worker << " answers but cannot be "
                   << "restored yet: " << restored;
    }
    absl::SleepFor(backoff.Next());
  }
  absl::MutexLock lock(&mu_);
  RecordError(absl::UnavailableError(
      absl::StrCat("worker ", worker, " did not come back within ",
                   absl::FormatDuration(options_.worker_recovery_timeout))));
}

bool ClusterCoordinator::TakeReplicaLoss() {
  absl::MutexLock lock(&mu_);
  return std::exchange(replica_lost_, false);
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
  stealable_.assign(workers_.size(), false);
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
