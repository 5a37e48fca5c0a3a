#include "coordinator/schedule/step_queue.h"

#include <algorithm>
#include <limits>

namespace tessera {

StepQueue::StepQueue(int num_queues, Options options, WakeFn wake)
    : num_queues_(num_queues),
      options_(options),
      wake_(std::move(wake)),
      workers_(num_queues),
      servers_(num_queues),
      own_(num_queues),
      stealable_(num_queues, false) {
  for (int w = 0; w < num_queues_; ++w) {
    workers_[w].presence = Presence::kActive;
    workers_[w].serves = {w};
    servers_[w] = {w};
  }
}

int StepQueue::AddWorker() {
  workers_.emplace_back();
  return num_workers() - 1;
}

void StepQueue::set_presence(int worker, Presence presence) {
  workers_[worker].presence = presence;
}

void StepQueue::Activate(int worker, int queue) {
  int64_t slowest = -1;
  for (const Worker& x : workers_) {
    if (x.presence != Presence::kActive || x.down) continue;
    if (slowest < 0 || x.finished < slowest) slowest = x.finished;
  }
  Worker& w = workers_[worker];
  if (options_.max_staleness >= 0) {
    w.credit = std::max<int64_t>(0, slowest);
    w.finished = w.credit;
  }
  w.presence = Presence::kActive;
  w.serves = {queue};
  servers_[queue].push_back(worker);
  UpdateStealable(queue);
  wake_(worker);
}

std::vector<StepQueue::Handover> StepQueue::Leave(int worker, Presence to) {
  workers_[worker].presence = to;
  if (to == Presence::kGone) workers_[worker].down = false;
  std::vector<Handover> handed;
  const std::vector<int> queues = std::move(workers_[worker].serves);
  workers_[worker].serves.clear();
  for (int q : queues) {
    std::vector<int>& servers = servers_[q];
    servers.erase(std::remove(servers.begin(), servers.end(), worker),
                  servers.end());
    bool served = false;
    for (int s : servers) served |= workers_[s].presence == Presence::kActive;
    if (!served) {
      // The active worker serving the fewest queues takes it over.
      int to_worker = -1;
      for (int w = 0; w < num_workers(); ++w) {
        if (workers_[w].presence != Presence::kActive) continue;
        if (to_worker < 0 ||
            workers_[w].serves.size() < workers_[to_worker].serves.size()) {
          to_worker = w;
        }
      }
      if (to_worker >= 0) {
        servers.push_back(to_worker);
        workers_[to_worker].serves.push_back(q);
        handed.push_back({q, to_worker});
        wake_(to_worker);
      }
    }
    UpdateStealable(q);
  }
  return handed;
}

int StepQueue::LiveServers(int queue) const {
  int n = 0;
  for (int w : servers_[queue]) n += workers_[w].presence != Presence::kGone;
  return n;
}

int StepQueue::ActiveWorkers() const {
  int n = 0;
  for (const Worker& w : workers_) n += w.presence == Presence::kActive;
  return n;
}

int StepQueue::QueueForNewWorker() const {
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

int64_t StepQueue::Slowest(int except) const {
  const bool any_unassigned = !any_.empty();
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (int w = 0; w < num_workers(); ++w) {
    const Worker& x = workers_[w];
    if (w == except || x.down || x.presence == Presence::kGone) continue;
    if (x.busy || any_unassigned) {
      slowest = std::min(slowest, x.finished);
      continue;
    }
    bool queued = false;
    for (int q : x.serves) queued |= !own_[q].empty();
    if (queued) slowest = std::min(slowest, x.finished);
  }
  return slowest;
}

int64_t StepQueue::Lead(int worker) const {
  const int64_t finished = workers_[worker].finished;
  return finished - std::min(finished, Slowest(worker));
}

int64_t StepQueue::progress(int worker) const {
  return workers_[worker].finished - workers_[worker].credit;
}

void StepQueue::Finish(int worker) { ++workers_[worker].finished; }

void StepQueue::SetBusy(int worker, bool busy) { workers_[worker].busy = busy; }

void StepQueue::SetDown(int worker, bool down) {
  workers_[worker].down = down;
  UpdateStealableOf(worker);
}

bool StepQueue::HasOwn(int worker) const {
  if (!any_.empty()) return true;
  for (int q : workers_[worker].serves) {
    if (!own_[q].empty()) return true;
  }
  return false;
}

bool StepQueue::HasWork(int worker) const {
  const Worker& w = workers_[worker];
  if (w.down || w.presence != Presence::kActive) return false;
  if (options_.max_staleness >= 0 && Lead(worker) > options_.max_staleness) {
    return false;
  }
  // A stealable queue is another worker's: this one has none of its own
  // then, or HasOwn already holds.
  return HasOwn(worker) || stealable_count_ > 0;
}

bool StepQueue::Stealable(int queue) const {
  const std::deque<QueuedStep>& q = own_[queue];
  if (q.empty()) return false;
  bool served = false;  // by a worker that is up
  for (int w : servers_[queue]) {
    served |= workers_[w].presence == Presence::kActive && !workers_[w].down;
  }
  return !served ||
         q.size() >= static_cast<size_t>(std::max(0, options_.steal_threshold));
}

void StepQueue::UpdateStealable(int queue) {
  const bool now = Stealable(queue);
  if (now == stealable_[queue]) return;
  stealable_[queue] = now;
  stealable_count_ += now ? 1 : -1;
  if (now) wake_(kEveryWorker);
}

void StepQueue::UpdateStealableOf(int worker) {
  for (int q : workers_[worker].serves) UpdateStealable(q);
}

void StepQueue::Enqueue(QueuedStep step, bool front) {
  step.seq = front ? front_seq_-- : back_seq_++;
  const int queue = step.queue;
  std::deque<QueuedStep>& q = queue < 0 ? any_ : own_[queue];
  if (front) {
    q.push_front(std::move(step));
  } else {
    q.push_back(std::move(step));
  }
  ++queued_;
  if (queue < 0) {
    wake_(kEveryWorker);  // anyone's
    return;
  }
  for (int w : servers_[queue]) wake_(w);
  UpdateStealable(queue);
}

QueuedStep StepQueue::PopOwn(int worker) {
  // The oldest of its queues' and the unassigned steps.
  int from = -1;  // -1: any_
  for (int q : workers_[worker].serves) {
    if (own_[q].empty()) continue;
    const std::deque<QueuedStep>& best = from < 0 ? any_ : own_[from];
    if (best.empty() || own_[q].front().seq < best.front().seq) from = q;
  }
  std::deque<QueuedStep>& q = from < 0 ? any_ : own_[from];
  QueuedStep step = std::move(q.front());
  q.pop_front();
  --queued_;
  if (from >= 0) UpdateStealable(from);
  return step;
}

QueuedStep StepQueue::Steal() {
  int from = -1;
  for (int q = 0; q < num_queues_; ++q) {
    if (stealable_[q] &&
        (from < 0 || own_[q].front().seq < own_[from].front().seq)) {
      from = q;
    }
  }
  QueuedStep step = std::move(own_[from].front());
  own_[from].pop_front();
  --queued_;
  UpdateStealable(from);
  return step;
}

void StepQueue::Take(int worker, int max_steps, std::vector<QueuedStep>* out) {
  out->clear();
  // Own (or unassigned) steps first, in order; else the oldest stealable.
  const bool own = HasOwn(worker);
  out->push_back(own ? PopOwn(worker) : Steal());
  if (options_.max_staleness >= 0) {
    max_lead_ = std::max(max_lead_, Lead(worker));
  }
  // More of its own steps, in queue order, in the same call: only without
  // a staleness bound, which counts steps one at a time.
  if (own && options_.max_staleness < 0) {
    while (static_cast<int>(out->size()) < max_steps && HasOwn(worker)) {
      out->push_back(PopOwn(worker));
    }
  }
  workers_[worker].busy = true;
}

std::vector<QueuedStep> StepQueue::Clear() {
  std::vector<QueuedStep> steps;
  steps.reserve(queued_);
  for (std::deque<QueuedStep>& q : own_) {
    for (QueuedStep& step : q) steps.push_back(std::move(step));
    q.clear();
  }
  for (QueuedStep& step : any_) steps.push_back(std::move(step));
  any_.clear();
  queued_ = 0;
  stealable_.assign(num_queues_, false);
  stealable_count_ = 0;
  return steps;
}

}  // namespace tessera
