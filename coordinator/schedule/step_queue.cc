#include "coordinator/schedule/step_queue.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "glog/logging.h"

namespace tessera {

StepQueue::StepQueue(int num_queues, Options options, WakeFn wake)
    : num_queues_(num_queues),
      num_shards_(num_queues),
      options_(options),
      wake_(std::move(wake)),
      workers_(num_queues),
      servers_(num_queues),
      own_(num_queues),
      stealable_(num_queues, false) {
  for (int w = 0; w < num_queues_; ++w) {
    workers_[w].state = MemberState::kActive;
    workers_[w].serves = {w};
    servers_[w] = {w};
    Rerank(w);
  }
}

void StepQueue::Rerank(int worker) {
  if (options_.max_staleness < 0) return;  // nobody asks for the slowest
  Worker& w = workers_[worker];
  if (w.in_up) up_.erase({w.key, worker});
  if (w.in_holding) holding_.erase({w.key, worker});
  w.key = w.finished;
  w.in_up = !w.down && !MemberStateIsGone(w.state);
  w.in_holding = w.in_up && (w.busy || w.serves_queued > 0);
  if (w.in_up) up_.insert({w.key, worker});
  if (w.in_holding) holding_.insert({w.key, worker});
  // The slowest may have dropped: a worker held back from now on is
  // woken when it rises again.
  woken_for_ = std::min(woken_for_, Slowest());
}

void StepQueue::QueueChanged(int queue, bool was_empty) {
  const bool empty = own_[queue].empty();
  if (empty == was_empty) return;
  for (int s : servers_[queue]) {
    workers_[s].serves_queued += empty ? -1 : 1;
    Rerank(s);
  }
}

int StepQueue::AddWorker() {
  workers_.emplace_back();
  Rerank(num_workers() - 1);
  return num_workers() - 1;
}

int StepQueue::AddQueue() {
  servers_.emplace_back();
  own_.emplace_back();
  stealable_.push_back(false);
  return num_queues_++;
}

void StepQueue::SetState(int worker, MemberState to) {
  DCHECK(MemberStateMayBecome(workers_[worker].state, to))
      << "worker " << worker << ": " << MemberStateName(workers_[worker].state)
      << " -> " << MemberStateName(to);
  workers_[worker].state = to;
}

void StepQueue::set_state(int worker, MemberState state) {
  SetState(worker, state);
  Rerank(worker);
}

void StepQueue::Activate(int worker, int queue) {
  int64_t slowest = -1;
  for (const Worker& x : workers_) {
    if (x.state != MemberState::kActive || x.down) continue;
    if (slowest < 0 || x.finished < slowest) slowest = x.finished;
  }
  Worker& w = workers_[worker];
  if (options_.max_staleness >= 0) {
    w.credit = std::max<int64_t>(0, slowest);
    w.finished = w.credit;
  }
  SetState(worker, MemberState::kActive);
  w.serves = {queue};
  w.serves_queued = own_[queue].empty() ? 0 : 1;
  servers_[queue].push_back(worker);
  Rerank(worker);
  UpdateStealable(queue);
  wake_(worker);
}

std::vector<StepQueue::Handover> StepQueue::Leave(int worker, MemberState to) {
  SetState(worker, to);
  if (MemberStateIsGone(to)) workers_[worker].down = false;
  std::vector<Handover> handed;
  const std::vector<int> queues = std::move(workers_[worker].serves);
  workers_[worker].serves.clear();
  workers_[worker].serves_queued = 0;
  Rerank(worker);
  for (int q : queues) {
    std::vector<int>& servers = servers_[q];
    servers.erase(std::remove(servers.begin(), servers.end(), worker),
                  servers.end());
    bool served = false;
    for (int s : servers) served |= workers_[s].state == MemberState::kActive;
    if (!served) {
      // The active worker serving the fewest queues takes it over.
      int to_worker = -1;
      for (int w = 0; w < num_workers(); ++w) {
        if (workers_[w].state != MemberState::kActive) continue;
        if (to_worker < 0 ||
            workers_[w].serves.size() < workers_[to_worker].serves.size()) {
          to_worker = w;
        }
      }
      if (to_worker >= 0) {
        servers.push_back(to_worker);
        workers_[to_worker].serves.push_back(q);
        if (!own_[q].empty()) {
          ++workers_[to_worker].serves_queued;
          Rerank(to_worker);
        }
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
  for (int w : servers_[queue]) n += !MemberStateIsGone(workers_[w].state);
  return n;
}

int StepQueue::ActiveWorkers() const {
  int n = 0;
  for (const Worker& w : workers_) n += w.state == MemberState::kActive;
  return n;
}

int StepQueue::QueueForNewWorker() const {
  // A shard's queue: those AddQueue made read no shard of their own.
  int best = 0;
  for (int q = 1; q < num_shards_; ++q) {
    const int servers = LiveServers(q), best_servers = LiveServers(best);
    if (servers < best_servers ||
        (servers == best_servers && own_[q].size() > own_[best].size())) {
      best = q;
    }
  }
  return best;
}

int64_t StepQueue::Slowest(int except) const {
  // With an unassigned step queued every worker that is up may take it,
  // so every one of them holds the others back.
  const Ranking& ranking = any_.empty() ? holding_ : up_;
  auto it = ranking.begin();
  if (it != ranking.end() && it->second == except) ++it;
  return it == ranking.end() ? std::numeric_limits<int64_t>::max() : it->first;
}

void StepQueue::WakeFreed() {
  if (options_.max_staleness < 0) return;
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  const int64_t before = std::exchange(woken_for_, Slowest());
  const int64_t now = woken_for_;
  if (now <= before) return;
  // A held-back worker is never the slowest, so Slowest() is its gate: it
  // may go on once its finished count is at most Slowest() + S.
  const int64_t s = options_.max_staleness;
  const auto first = up_.lower_bound({before + s + 1, -1});
  const auto last =
      now >= kNone - s ? up_.end() : up_.lower_bound({now + s + 1, -1});
  for (auto it = first; it != last; ++it) wake_(it->second);
}

int64_t StepQueue::Lead(int worker) const {
  const int64_t finished = workers_[worker].finished;
  return finished - std::min(finished, Slowest(worker));
}

int64_t StepQueue::progress(int worker) const {
  return workers_[worker].finished - workers_[worker].credit;
}

void StepQueue::Finish(int worker) {
  ++workers_[worker].finished;
  Rerank(worker);
}

void StepQueue::SetBusy(int worker, bool busy) {
  workers_[worker].busy = busy;
  Rerank(worker);
}

void StepQueue::SetDown(int worker, bool down) {
  workers_[worker].down = down;
  Rerank(worker);
  UpdateStealableOf(worker);
}

bool StepQueue::AnyDown() const {
  for (const Worker& w : workers_) {
    if (w.down && !MemberStateIsGone(w.state)) return true;
  }
  return false;
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
  if (w.down || w.state != MemberState::kActive) return false;
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
    served |= workers_[w].state == MemberState::kActive && !workers_[w].down;
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
  const bool was_empty = q.empty();
  if (front) {
    q.push_front(std::move(step));
  } else {
    q.push_back(std::move(step));
  }
  ++queued_;
  if (queue < 0) {
    // Every worker that is up holds the others back now.
    if (options_.max_staleness >= 0) {
      woken_for_ = std::min(woken_for_, Slowest());
    }
    wake_(kEveryWorker);  // anyone's
    return;
  }
  QueueChanged(queue, was_empty);
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
  if (from >= 0) {
    QueueChanged(from, /*was_empty=*/false);
    UpdateStealable(from);
  }
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
  QueueChanged(from, /*was_empty=*/false);
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
  Rerank(worker);
}

std::vector<QueuedStep> StepQueue::Clear() {
  std::vector<QueuedStep> steps;
  steps.reserve(queued_);
  for (int queue = 0; queue < num_queues_; ++queue) {
    std::deque<QueuedStep>& q = own_[queue];
    const bool was_empty = q.empty();
    for (QueuedStep& step : q) steps.push_back(std::move(step));
    q.clear();
    QueueChanged(queue, was_empty);
  }
  for (QueuedStep& step : any_) steps.push_back(std::move(step));
  any_.clear();
  queued_ = 0;
  stealable_.assign(num_queues_, false);
  stealable_count_ = 0;
  return steps;
}

}  // namespace tessera
