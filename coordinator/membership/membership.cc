#include "coordinator/membership/membership.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/worker_task.h"
#include "glog/logging.h"

namespace tessera {

Membership::Membership(std::vector<WorkerTask*> initial, WorkerSeats* seats,
                       int min_workers, absl::Time now)
    : seats_(seats), min_workers_(std::max(1, min_workers)) {
  absl::MutexLock lock(&mu_);
  for (size_t w = 0; w < initial.size(); ++w) {
    rows_.push_back(
        {initial[w], initial[w]->address(), MemberState::kActive, false, now});
    Record(static_cast<int>(w), "started with the job", now);
  }
}

absl::StatusOr<int> Membership::Join(std::unique_ptr<WorkerTask> task,
                                     absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (seats_ == nullptr) {
    return absl::FailedPreconditionError("no worker can join this job");
  }
  WorkerTask* raw = task.get();
  absl::StatusOr<int> index = seats_->AddSeat(std::move(task));
  if (!index.ok()) return index.status();
  if (*index != static_cast<int>(rows_.size())) {
    return absl::InternalError(absl::StrCat("the coordinator numbered worker ",
                                            raw->address(), " ", *index,
                                            ", not ", rows_.size()));
  }
  rows_.push_back({raw, raw->address(), MemberState::kJoining, false, now});
  Record(*index, "asked to join", now);
  return *index;
}

int Membership::QueueForNewWorker() const {
  return seats_ == nullptr ? 0 : seats_->QueueForNewWorker();
}

absl::Status Membership::Activate(int worker, int queue, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(rows_.size()) ||
      rows_[worker].shown() != MemberState::kJoining) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " is not joining"));
  }
  // A joining worker has a seat: seats_ is set.
  if (queue < 0 || queue >= seats_->num_queues()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", queue, " is not in [0, ", seats_->num_queues(), ")"));
  }
  if (absl::Status s = seats_->Serve(worker, queue); !s.ok()) return s;
  Change(worker, MemberState::kActive, absl::StrCat("serves shard ", queue),
         now);
  return absl::OkStatus();
}

void Membership::Forget(int worker, const std::string& why, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(rows_.size()) ||
      rows_[worker].shown() != MemberState::kJoining) {
    return;
  }
  // A joining seat serves nothing and may always leave.
  const absl::Status left = seats_->Leave(worker, MemberState::kRemoved);
  DCHECK(left.ok()) << left;
  Change(worker, MemberState::kRemoved, why, now);
}

absl::Status Membership::CheckDrain(int worker) const {
  const int n = static_cast<int>(rows_.size());
  if (worker < 0 || worker >= n) {
    return absl::NotFoundError(absl::StrCat("there is no worker ", worker,
                                            " (the job has workers 0 to ",
                                            n - 1, ")"));
  }
  // Down or not: a down worker drains as it would once back.
  const MemberState state = rows_[worker].state;
  if (state != MemberState::kActive) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " ",
                     state == MemberState::kJoining ? "is still joining"
                     : state == MemberState::kDraining
                         ? "is already draining"
                         : "has already left (drained or removed)"));
  }
  const int active = static_cast<int>(std::count_if(
      rows_.begin(), rows_.end(),
      [](const Row& row) { return row.state == MemberState::kActive; }));
  if (active - 1 < min_workers_) {
    return absl::FailedPreconditionError(
        absl::StrCat("draining worker ", worker, " would leave ", active - 1,
                     " worker(s), fewer than the job's minimum of ",
                     min_workers_, " (--min_workers)"));
  }
  if (seats_ == nullptr) {
    return absl::FailedPreconditionError("no worker can drain from this job");
  }
  return absl::OkStatus();
}

absl::Status Membership::Drain(int worker, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckDrain(worker); !s.ok()) return s;
  // The seats' refusal: the worker was removed meanwhile, not yet told.
  if (absl::Status s = seats_->Leave(worker, MemberState::kDraining); !s.ok()) {
    return s;
  }
  // An idle worker drains at once: its kDrained (Set) waits for mu_, so
  // it comes after this.
  LOG(INFO) << "worker " << worker << " is draining";
  Change(worker, MemberState::kDraining, "finishes the steps it holds", now);
  return absl::OkStatus();
}

void Membership::Set(int worker, MemberState state, const std::string& note,
                     absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(rows_.size())) return;
  const Row& row = rows_[worker];
  // Joins and drains are Join's, Activate's, Forget's and Drain's.
  if (row.state == MemberState::kJoining || state == MemberState::kJoining ||
      state == MemberState::kDraining) {
    return;
  }
  if (!MemberStateMayBecome(row.shown(), state)) return;
  Change(worker, state, note, now);
}

void Membership::Change(int worker, MemberState to, const std::string& note,
                        absl::Time now) {
  Row& row = rows_[worker];
  DCHECK(MemberStateMayBecome(row.shown(), to))
      << "worker " << worker << ": " << MemberStateName(row.shown()) << " -> "
      << MemberStateName(to);
  if (to == MemberState::kDown) {
    row.down = true;
  } else if (row.down && to == MemberState::kActive) {
    row.down = false;  // back, to the state it had: active or draining
  } else {
    row.down = false;
    row.state = to;
  }
  row.since = now;
  Record(worker, note, now);
}

void Membership::Record(int worker, const std::string& note, absl::Time now) {
  const Row& row = rows_[worker];
  MembershipChange change;
  change.set_worker(worker);
  change.set_address(row.address);
  change.set_state(MemberStateName(row.shown()));
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
  return rows_.at(worker).shown();
}

WorkerTask* Membership::task(int worker) const {
  absl::MutexLock lock(&mu_);
  return rows_.at(worker).task;
}

std::vector<WorkerTask*> Membership::Active() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerTask*> out;
  for (const Row& row : rows_) {
    if (row.shown() == MemberState::kActive) out.push_back(row.task);
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
    w.set_state(MemberStateName(row.shown()));
    w.set_state_since_ms(absl::ToUnixMillis(row.since));
  }
  for (const MembershipChange& change : history_) {
    *status->add_membership() = change;
  }
}

}  // namespace tessera
