#include "coordinator/worker_replicas.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "coordinator/parallel/bounded_for_each.h"

namespace tessera {

WorkerReplicas::WorkerReplicas(std::vector<WorkerTask*> workers,
                               int max_concurrency)
    : workers_(std::move(workers)), max_concurrency_(max_concurrency) {}

absl::Status WorkerReplicas::Save(const std::string& directory, int64_t step,
                                  SaveShardsResponse* response) {
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
  return BoundedForEach(
      static_cast<int>(workers_.size()), max_concurrency_, [&](int w) {
        EvaluateRequest empty;  // [0, 0)
        EvaluateResponse response;
        absl::Status s = workers_[w]->Evaluate(empty, &response);
        if (s.ok()) return s;
        return absl::Status(
            s.code(), absl::StrCat("worker ", w, " (", workers_[w]->address(),
                                   ") settling its row pushes: ", s.message()));
      });
}

absl::Status WorkerReplicas::Restore(const ValidCheckpoint& checkpoint) {
  RestoreReplicaRequest request;
  request.mutable_checkpoint()->set_directory(checkpoint.path);
  *request.mutable_checkpoint()->mutable_manifest() = checkpoint.manifest;
  last_epoch_ = std::max(
      last_epoch_ + 1, static_cast<uint64_t>(absl::ToUnixMicros(absl::Now())));
  request.set_collective_epoch(last_epoch_);
  return BoundedForEach(
      static_cast<int>(workers_.size()), max_concurrency_, [&](int w) {
        RestoreShardsResponse response;
        absl::Status s = workers_[w]->RestoreReplica(request, &response);
        if (s.ok()) return s;
        return absl::Status(
            s.code(), absl::StrCat("worker ", w, " (", workers_[w]->address(),
                                   "): ", s.message()));
      });
}

absl::Status WorkerReplicas::Copy(int from, const std::string& directory,
                                  const JobConfig& job) {
  if (from < 0 || from >= static_cast<int>(workers_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("no worker ", from, " to copy a replica from"));
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
        s.code(), absl::StrCat("worker ", from, " (", workers_[from]->address(),
                               ") could not save its replica: ", s.message()));
  }
  // The manifest of a checkpoint holding the replica alone.
  ValidCheckpoint copy;
  copy.path = directory;
  AddSavedFiles({saved}, job, &copy.manifest);
  return Restore(copy);
}

}  // namespace tessera
