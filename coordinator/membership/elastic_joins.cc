#include "coordinator/membership/elastic_joins.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_spec.h"
#include "common/rpc/backoff.h"
#include "glog/logging.h"

namespace tessera {

ElasticJoins::ElasticJoins(Membership* membership, JoinConfig join_config,
                           std::FILE* out, ElasticJoinsOptions options)
    : membership_(membership),
      join_config_(std::move(join_config)),
      out_(out),
      options_(std::move(options)) {}

ElasticJoins::~ElasticJoins() { Close(); }

absl::Status ElasticJoins::RefuseMembershipChange(
    const std::string& what) const {
  return absl::FailedPreconditionError(absl::StrCat(
      "mode ", options_.mode.ToString(), ": ", what,
      " is refused: every worker of a mirrored or hybrid job holds a "
      "replica that meets the others' in an all-reduce ring, which is "
      "re-formed between rounds only with a --checkpoint_dir (a newcomer's "
      "replica is copied through it); run the job with one, or with the "
      "workers it needs (docs/operations.md, \"Growing and shrinking a "
      "job\")"));
}

absl::StatusOr<AddWorkerResponse> ElasticJoins::AddWorker(
    const std::string& address) {
  if (options_.mode.replicates_dense() && !options_.reforms_ring) {
    return RefuseMembershipChange(
        absl::StrCat("a worker joining at ", address));
  }
  if (!options_.connect_worker) {
    return absl::FailedPreconditionError(
        "this coordinator was started without a way to reach new workers");
  }
  if (joins_closed_) {
    return absl::FailedPreconditionError(
        "the job has ended: no worker can join it");
  }
  if (!accepting_joins_) {
    // The joining worker asks again: UNAVAILABLE is what it retries.
    return absl::UnavailableError(
        "the job is still starting; workers join once it trains");
  }
  absl::MutexLock lock(&join_mu_);
  const int index = membership_->size();
  std::map<std::string, std::vector<std::string>> jobs = options_.cluster_jobs;
  std::vector<std::string>& addresses = jobs["worker"];
  addresses.clear();
  for (int w = 0; w < index; ++w) {
    addresses.push_back(membership_->task(w)->address());
  }
  addresses.push_back(address);
  // Checks the address (host:port, not a task of the job already).
  absl::StatusOr<ClusterSpec> cluster =
      ClusterSpec::FromParts(std::move(jobs), {"worker", index});
  if (!cluster.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a worker cannot join at ", address, ": ", cluster.status().message()));
  }
  std::unique_ptr<WorkerTask> task = options_.connect_worker(address, index);
  WorkerTask* raw = task.get();
  absl::StatusOr<int> added = membership_->Join(std::move(task));
  if (!added.ok()) return added.status();
  if (*added != index) {
    return absl::InternalError(absl::StrCat("the coordinator numbered worker ",
                                            address, " ", *added, ", not ",
                                            index));
  }
  std::fprintf(out_, "worker %d (%s) asked to join; configuring it\n", index,
               address.c_str());
  std::fflush(out_);
  join_threads_.emplace_back([this, index, raw] { FinishJoin(index, raw); });
  AddWorkerResponse response;
  response.set_worker_index(index);
  response.set_tf_config(cluster->ToTfConfigJson());
  return response;
}

void ElasticJoins::FinishJoin(int index, WorkerTask* task) {
  // The shard it will serve, loaded as it is configured, as at start-up.
  const int queue = membership_->QueueForNewWorker();
  absl::Status s;
  absl::StatusOr<WorkerConfig> config = join_config_(index, queue);
  if (!config.ok()) s = config.status();
  // It starts serving once it has its index: wait for it as for the
  // cluster at start-up (cluster_wait), or until the job's end.
  const absl::Time deadline = absl::Now() + options_.cluster_wait;
  Backoff backoff;
  ConfigureResponse response;
  while (s.ok()) {
    response.Clear();
    absl::Status attempt = task->Configure(*config, &response);
    if (attempt.ok() || !IsTransient(attempt) || joins_closed_ ||
        absl::Now() >= deadline) {
      s = attempt;
      break;
    }
    absl::SleepFor(backoff.Next());
  }
  if (s.ok() && joins_closed_) {
    s = absl::CancelledError("the job ended while the worker joined");
  }
  // A job recovering from a failure (a parameter server restored) takes
  // it once recovered.
  while (s.ok()) {
    s = membership_->Activate(index, queue);
    if (s.ok() || !IsTransient(s) || joins_closed_ || absl::Now() >= deadline) {
      break;
    }
    s = absl::OkStatus();
    absl::SleepFor(backoff.Next());
  }
  if (!s.ok()) {
    membership_->Forget(index, absl::StrCat("could not join: ", s.message()));
    // It may serve by now: it is told to go, as the job's workers are at
    // the end.
    task->Shutdown(absl::StrCat("could not join: ", s.message())).IgnoreError();
    std::fprintf(out_, "worker %d (%s) could not join: %s\n", index,
                 task->address().c_str(), s.ToString().c_str());
    std::fflush(out_);
    return;
  }
  if (options_.mode.replicates_dense()) {
    std::fprintf(out_,
                 "worker %d (%s) joined on %s; it takes a part of every "
                 "round once the all-reduce ring has it\n",
                 index, task->address().c_str(), response.device().c_str());
  } else {
    std::fprintf(out_,
                 "worker %d (%s) joined on %s; it takes shard %d's steps "
                 "with the workers already serving it\n",
                 index, task->address().c_str(), response.device().c_str(),
                 queue);
  }
  std::fflush(out_);
}

absl::StatusOr<int> ElasticJoins::DrainWorker(const std::string& worker) {
  if (options_.mode.replicates_dense() && !options_.reforms_ring) {
    return RefuseMembershipChange(absl::StrCat("draining worker ", worker));
  }
  if (!accepting_joins_ || joins_closed_) {
    return absl::FailedPreconditionError(
        "workers drain only while the job trains");
  }
  int index = -1;
  if (!absl::SimpleAtoi(worker, &index)) {
    index = membership_->IndexOf(worker);
    if (index < 0) {
      return absl::NotFoundError(
          absl::StrCat("no worker of the job is at ", worker,
                       " (tessera_ctl status lists them)"));
    }
  }
  if (absl::Status s = membership_->Drain(index); !s.ok()) return s;
  std::fprintf(out_, "worker %d is draining: it finishes its steps and exits\n",
               index);
  std::fflush(out_);
  return index;
}

void RecordMemberChange(Membership* membership, std::FILE* out, int worker,
                        MemberState state, const std::string& note) {
  membership->Set(worker, state, note);
  if (state == MemberState::kDrained) {
    WorkerTask* task = membership->task(worker);
    if (absl::Status s = task->Shutdown("drained"); !s.ok()) {
      LOG(WARNING) << "worker " << worker
                   << " drained; telling it to exit: " << s;
    }
    std::fprintf(out, "worker %d drained and told to exit\n", worker);
    std::fflush(out);
  } else if (state == MemberState::kRemoved) {
    std::fprintf(out,
                 "worker %d %s: removed from the job; its steps go to the "
                 "others\n",
                 worker, note.c_str());
    std::fflush(out);
  }
}

void PrintMembershipChanges(std::FILE* out, const JobStatus& now, int initial) {
  bool changed = now.workers_size() != initial;
  for (const WorkerState& w : now.workers()) changed |= w.state() != "active";
  if (!changed) return;
  std::fprintf(out, "workers at the end (%d in all):\n", now.workers_size());
  for (const WorkerState& w : now.workers()) {
    std::fprintf(out, "  worker %d %-21s %-8s %lld steps\n", w.index(),
                 w.address().c_str(), w.state().c_str(),
                 static_cast<long long>(w.steps_done()));
  }
  std::fflush(out);
}

void ElasticJoins::Close() {
  accepting_joins_ = false;
  joins_closed_ = true;
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&join_mu_);
    threads.swap(join_threads_);
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace tessera
