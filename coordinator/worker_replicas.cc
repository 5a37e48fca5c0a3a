#include "coordinator/worker_replicas.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/rpc/backoff.h"
#include "coordinator/parallel/bounded_for_each.h"
#include "glog/logging.h"

namespace tessera {

WorkerReplicas::WorkerReplicas(std::vector<WorkerTask*> workers,
                               int max_concurrency,
                               absl::Duration restart_timeout,
                               int pushes_in_flight)
    : workers_(std::move(workers)),
      max_concurrency_(max_concurrency),
      restart_timeout_(restart_timeout),
      pushes_in_flight_(pushes_in_flight) {
  for (size_t w = 0; w < workers_.size(); ++w) {
    indices_.push_back(static_cast<int>(w));
  }
}

void WorkerReplicas::Drop(int index) {
  absl::MutexLock lock(&drop_mu_);
  dropped_.push_back(index);
}

void WorkerReplicas::ApplyDrops() {
  std::vector<int> dropped;
  {
    absl::MutexLock lock(&drop_mu_);
    dropped.swap(dropped_);
  }
  for (int index : dropped) {
    auto it = std::find(indices_.begin(), indices_.end(), index);
    if (it == indices_.end()) continue;
    workers_.erase(workers_.begin() + (it - indices_.begin()));
    indices_.erase(it);
    reformed_ = true;  // the next Restore gives the members their ring
  }
}

const std::vector<WorkerTask*>& WorkerReplicas::members() {
  ApplyDrops();
  return workers_;
}

const std::vector<int>& WorkerReplicas::indices() {
  ApplyDrops();
  return indices_;
}

absl::Status WorkerReplicas::Save(const std::string& directory, int64_t step,
                                  SaveShardsResponse* response) {
  ApplyDrops();
  SaveShardsRequest request;
  request.set_directory(directory);
  request.set_global_step(step);
  std::vector<std::string> errors;
  for (size_t w = 0; w < workers_.size(); ++w) {
    absl::Status s = workers_[w]->SaveReplica(request, response);
    if (s.ok()) return s;
    errors.push_back(absl::StrCat("worker ", w, ": ", s.message()));
  }
  return absl::UnavailableError(absl::StrCat("no worker saved its replica: ",
                                             absl::StrJoin(errors, "; ")));
}

absl::Status WorkerReplicas::SettleRowPushes() {
  return BoundedForEach(static_cast<int>(workers_.size()), max_concurrency_,
                        [&](int w) { return SettleOne(w); });
}

absl::Status WorkerReplicas::SettleOne(int w) {
  WorkerTask* worker = workers_[w];
  const std::string who = Who(w);
  const absl::Time deadline = absl::Now() + restart_timeout_;
  Backoff backoff;
  while (true) {
    EvaluateRequest empty;  // [0, 0)
    EvaluateResponse response;
    absl::Status s = worker->Evaluate(empty, &response);
    if (s.ok()) return s;
    // A worker that restarted (it answers unconfigured) ended its pushes
    // in flight with its process. Without a staleness bound on rows it had
    // none once its steps ended; under hybrid:ssp:S its last S steps' row
    // pushes were still in flight (RowExchange keeps them), and the
    // checkpoint would record those steps as trained without their rows'
    // gradients. One that does not answer is waited for: a stopped worker
    // still holds its pushes.
    const WorkerHealth health = worker->Probe();
    if (health == WorkerHealth::kLostState) {
      if (pushes_in_flight_ == 0) {
        LOG(INFO) << who << " restarted: none of its row pushes is in flight";
        return absl::OkStatus();
      }
      return RowPushesLostError(absl::StrCat(
          who, " restarted with up to ", pushes_in_flight_,
          " of its row pushes in flight (hybrid:ssp): the gradients of its "
          "last steps may be missing from the servers, so no checkpoint can "
          "count those steps as trained; the job must go back to its last "
          "checkpoint"));
    }
    if (health == WorkerHealth::kReady && !IsTransient(s)) {
      return absl::Status(s.code(), absl::StrCat(who,
                                                 " settling its row "
                                                 "pushes: ",
                                                 s.message()));
    }
    if (absl::Status back =
            AwaitWorker(w, deadline, /*configure=*/false,
                        "to settle its row pushes", &backoff, s);
        !back.ok()) {
      return back;
    }
  }
}

std::string WorkerReplicas::Who(int w) const {
  return absl::StrCat("worker ", indices_[w], " (", workers_[w]->address(),
                      ")");
}

absl::Status WorkerReplicas::AwaitWorker(int w, absl::Time deadline,
                                         bool configure, absl::string_view why,
                                         Backoff* backoff, absl::Status last) {
  WorkerTask* worker = workers_[w];
  while (absl::Now() < deadline) {
    absl::SleepFor(std::min(backoff->Next(), deadline - absl::Now()));
    const WorkerHealth health = worker->Probe();
    if (health == WorkerHealth::kReady) return absl::OkStatus();
    if (health != WorkerHealth::kLostState) continue;
    // Back, but restarted: the caller's call tells it so unless the worker
    // is to be configured again here.
    if (!configure) return absl::OkStatus();
    absl::Status configured = worker->Restore();
    if (configured.ok()) return configured;
    last = configured;
  }
  return absl::UnavailableError(absl::StrCat(
      Who(w), " did not come back within ",
      absl::FormatDuration(restart_timeout_), " ", why, ": ", last.message()));
}

absl::Status WorkerReplicas::Restore(const ValidCheckpoint& checkpoint) {
  return RestoreMembers(&checkpoint, {});
}

absl::Status WorkerReplicas::RestoreMembers(const ValidCheckpoint* checkpoint,
                                            const std::vector<bool>& only) {
  ApplyDrops();
  RestoreReplicaRequest request;
  last_epoch_ = std::max(
      last_epoch_ + 1, static_cast<uint64_t>(absl::ToUnixMicros(absl::Now())));
  request.set_collective_epoch(last_epoch_);
  if (reformed_) {
    for (WorkerTask* w : workers_) request.add_ring_peers(w->address());
  }
  return BoundedForEach(
      static_cast<int>(workers_.size()), max_concurrency_, [&](int w) {
        RestoreReplicaRequest mine = request;
        if (checkpoint != nullptr && (only.empty() || only[w])) {
          mine.mutable_checkpoint()->set_directory(checkpoint->path);
          *mine.mutable_checkpoint()->mutable_manifest() = checkpoint->manifest;
        }
        mine.set_ring_rank(w);
        return RestoreOne(w, mine);
      });
}

absl::Status WorkerReplicas::RestoreOne(int w,
                                        const RestoreReplicaRequest& request) {
  WorkerTask* worker = workers_[w];
  const std::string who = Who(w);
  const absl::Time deadline = absl::Now() + restart_timeout_;
  Backoff backoff;
  bool waited = false;
  while (true) {
    RestoreShardsResponse response;
    absl::Status s = worker->RestoreReplica(request, &response);
    if (s.ok()) break;
    // A worker killed while the job goes back to its checkpoint restarts
    // (the parameter servers' recovery waits for theirs alike): one that
    // does not answer yet is waited for, one that answers unconfigured is
    // configured again, as the coordinator does for a worker back.
    if (!IsTransient(s) && worker->Probe() != WorkerHealth::kLostState) {
      return absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
    }
    if (absl::Status back = AwaitWorker(w, deadline, /*configure=*/true,
                                        "to restore its replica", &backoff, s);
        !back.ok()) {
      return back;
    }
    waited = true;
  }
  if (waited) LOG(INFO) << who << " came back and restored its replica";
  return absl::OkStatus();
}

absl::Status WorkerReplicas::Reform(std::vector<int> indices,
                                    std::vector<WorkerTask*> ring,
                                    const std::string& directory,
                                    const JobConfig& job) {
  ApplyDrops();
  if (ring.empty() || indices.size() != ring.size()) {
    return absl::InvalidArgumentError(absl::StrCat("an all-reduce ring of ",
                                                   ring.size(), " members and ",
                                                   indices.size(), " indices"));
  }
  std::vector<bool> newcomer(ring.size(), false);
  WorkerTask* survivor = nullptr;
  for (size_t i = 0; i < ring.size(); ++i) {
    newcomer[i] =
        std::find(workers_.begin(), workers_.end(), ring[i]) == workers_.end();
    if (!newcomer[i] && survivor == nullptr) survivor = ring[i];
  }
  const bool any_new =
      std::find(newcomer.begin(), newcomer.end(), true) != newcomer.end();
  if (any_new && survivor == nullptr) {
    return absl::FailedPreconditionError(
        "no member of the all-reduce ring holds the job's replica");
  }
  ValidCheckpoint copy;
  if (any_new) {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) {
      return absl::UnavailableError(
          absl::StrCat("cannot make ", directory,
                       " for a replica's copy: ", error.message()));
    }
    SaveShardsRequest request;
    request.set_directory(directory);
    SaveShardsResponse saved;
    if (absl::Status s = survivor->SaveReplica(request, &saved); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat(survivor->address(),
                                 " could not save its replica: ", s.message()));
    }
    copy.path = directory;
    AddSavedFiles({saved}, job, &copy.manifest);
  }
  workers_ = std::move(ring);
  indices_ = std::move(indices);
  reformed_ = true;
  absl::Status s = RestoreMembers(any_new ? &copy : nullptr, newcomer);
  if (any_new) {
    std::error_code ignored;
    std::filesystem::remove_all(directory, ignored);
  }
  return s;
}

absl::Status WorkerReplicas::Copy(int index, const std::string& directory,
                                  const JobConfig& job) {
  ApplyDrops();
  const int from = static_cast<int>(
      std::find(indices_.begin(), indices_.end(), index) - indices_.begin());
  if (from >= static_cast<int>(workers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", index, " holds no replica of the ring to copy from"));
  }
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat(
        "cannot make ", directory, " for a replica's copy: ", error.message()));
  }
  SaveShardsRequest request;
  request.set_directory(directory);
  SaveShardsResponse saved;
  if (absl::Status s = workers_[from]->SaveReplica(request, &saved); !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat("worker ", index, " (", workers_[from]->address(),
                     ") could not save its replica: ", s.message()));
  }
  // The manifest of a checkpoint holding the replica alone.
  ValidCheckpoint copy;
  copy.path = directory;
  AddSavedFiles({saved}, job, &copy.manifest);
  return Restore(copy);
}

}  // namespace tessera
