#include "coordinator/membership/membership.h"

#include <utility>

#include "coordinator/worker_task.h"

namespace tessera {

Membership::Membership(std::vector<WorkerTask*> initial, absl::Time now) {
  absl::MutexLock lock(&mu_);
  for (size_t w = 0; w < initial.size(); ++w) {
    rows_.push_back(
        {initial[w], initial[w]->address(), MemberState::kActive, now});
    Record(static_cast<int>(w), "started with the job", now);
  }
}

void Membership::Add(int index, WorkerTask* task, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (index != static_cast<int>(rows_.size())) return;
  rows_.push_back({task, task->address(), MemberState::kJoining, now});
  Record(index, "asked to join", now);
}

void Membership::Set(int worker, MemberState state, const std::string& note,
                     absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(rows_.size())) return;
  Row& row = rows_[worker];
  if (!MemberStateMayBecome(row.state, state)) return;
  row.state = state;
  row.since = now;
  Record(worker, note, now);
}

void Membership::Record(int worker, const std::string& note, absl::Time now) {
  const Row& row = rows_[worker];
  MembershipChange change;
  change.set_worker(worker);
  change.set_address(row.address);
  change.set_state(MemberStateName(row.state));
  change.set_time_ms(absl::ToUnixMillis(now));
  change.set_note(note);
  history_.push_back(std::move(change));
}

int Membership::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(rows_.size());
}

MemberState Membership::state(int worker) const {
  absl::MutexLock lock(&mu_);
  return rows_.at(worker).state;
}

WorkerTask* Membership::task(int worker) const {
  absl::MutexLock lock(&mu_);
  return rows_.at(worker).task;
}

std::vector<WorkerTask*> Membership::Active() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerTask*> out;
  for (const Row& row : rows_) {
    if (row.state == MemberState::kActive) out.push_back(row.task);
  }
  return out;
}

std::vector<WorkerTask*> Membership::Present() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerTask*> out;
  for (const Row& row : rows_) {
    if (!MemberStateIsGone(row.state)) out.push_back(row.task);
  }
  return out;
}

int Membership::IndexOf(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  for (size_t w = 0; w < rows_.size(); ++w) {
    if (rows_[w].address == address) return static_cast<int>(w);
  }
  return -1;
}

void Membership::Fill(JobStatus* status) const {
  absl::MutexLock lock(&mu_);
  for (WorkerState& w : *status->mutable_workers()) {
    if (w.index() < 0 || w.index() >= static_cast<int>(rows_.size())) continue;
    const Row& row = rows_[w.index()];
    w.set_state(MemberStateName(row.state));
    w.set_state_since_ms(absl::ToUnixMillis(row.since));
  }
  for (const MembershipChange& change : history_) {
    *status->add_membership() = change;
  }
}

}  // namespace tessera
