#include "coordinator/job_checkpointer.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace tessera {
namespace {

// The payload that marks RowPushesLostError's status.
constexpr absl::string_view kRowPushesLost =
    "tessera.coordinator/row_pushes_lost";

// Runs call(k) for every server at once; the first failure wins.
absl::Status ForEachServer(size_t n,
                           const std::function<absl::Status(size_t)>& call) {
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < n; ++k) {
    threads.emplace_back([&, k] { statuses[k] = call(k); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The manifest that commits a checkpoint of `responses` at `position`.
CheckpointManifest ManifestOf(const JobPosition& position, int num_ps,
                              const std::vector<SaveShardsResponse>& responses,
                              const JobConfig& job) {
  CheckpointManifest manifest;
  manifest.set_global_step(position.global_step);
  manifest.set_epoch(position.epoch);
  manifest.set_next_step_in_epoch(position.next_step_in_epoch);
  manifest.set_next_sync_step(position.next_sync_step);
  if (position.next_step_in_epoch > 0) {
    *manifest.mutable_epoch_progress() = position.progress;
  }
  manifest.set_num_ps(num_ps);
  manifest.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  AddSavedFiles(responses, job, &manifest);
  return manifest;
}

}  // namespace

absl::Status RowPushesLostError(absl::string_view message) {
  absl::Status s = absl::AbortedError(message);
  s.SetPayload(kRowPushesLost, absl::Cord("1"));
  return s;
}

bool RowPushesLost(const absl::Status& status) {
  return absl::IsAborted(status) &&
         status.GetPayload(kRowPushesLost).has_value();
}

void AddSavedFiles(const std::vector<SaveShardsResponse>& saved,
                   const JobConfig& job, CheckpointManifest* manifest) {
  *manifest->mutable_optimizer() = job.optimizer();
  *manifest->mutable_job() = job;
  // Each server saved its part of a variable; the manifest has it whole.
  std::map<std::string, CheckpointVariable> variables;
  for (const SaveShardsResponse& r : saved) {
    *manifest->add_files() = r.file();
    for (const CheckpointVariable& part : r.variables()) {
      auto [it, fresh] = variables.try_emplace(part.name(), part);
      if (fresh) continue;
      for (const CheckpointShard& shard : part.shards()) {
        *it->second.add_shards() = shard;
      }
    }
  }
  for (auto& [name, variable] : variables) {
    *variable.mutable_partitioner() = job.partitioner();
    std::sort(variable.mutable_shards()->begin(),
              variable.mutable_shards()->end(),
              [](const CheckpointShard& a, const CheckpointShard& b) {
                return a.index() < b.index();
              });
    *manifest->add_variables() = std::move(variable);
  }
}

JobPosition PositionOf(const CheckpointManifest& manifest) {
  JobPosition p;
  p.global_step = manifest.global_step();
  p.epoch = manifest.epoch();
  p.next_step_in_epoch = manifest.next_step_in_epoch();
  p.next_sync_step = manifest.next_sync_step();
  p.progress = manifest.epoch_progress();
  return p;
}

JobCheckpointer::JobCheckpointer(std::string root, int keep,
                                 std::vector<PsClient*> ps, JobConfig job)
    : dir_(std::move(root)),
      keep_(std::max(1, keep)),
      ps_(std::move(ps)),
      job_(std::move(job)) {}

void JobCheckpointer::ExpectShards(std::vector<int64_t> per_ps) {
  expected_shards_ = std::move(per_ps);
}

absl::StatusOr<std::string> JobCheckpointer::Save(const JobPosition& position) {
  // A checkpoint that fails leaves no partial files: a folder this call
  // created goes again (one that was there before may hold a user's files,
  // and rotation deals with it).
  const std::string path = dir_.PathFor(position.global_step);
  std::error_code error;
  const bool existed = std::filesystem::exists(path, error);
  absl::StatusOr<std::string> saved = SaveInto(position);
  if (!saved.ok() && !existed && std::filesystem::exists(path, error)) {
    std::filesystem::remove_all(path, error);
    if (error) {
      LOG(WARNING) << "could not remove the failed checkpoint " << path << ": "
                   << error.message();
    }
  }
  return saved;
}

absl::StatusOr<std::vector<SaveShardsResponse>> JobCheckpointer::SaveShards(
    const std::string& directory, const JobPosition& position) {
  std::vector<SaveShardsResponse> responses(ps_.size());
  if (absl::Status s =
          ForEachServer(ps_.size(),
                        [&](size_t k) {
                          SaveShardsRequest request;
                          request.set_directory(directory);
                          request.set_ps_index(static_cast<int>(k));
                          request.set_global_step(position.global_step);
                          return ps_[k]->SaveShards(request, &responses[k]);
                        });
      !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("checkpoint at step ", position.global_step,
                               ": ", s.message()));
  }

  for (size_t k = 0; k < expected_shards_.size() && k < responses.size(); ++k) {
    int64_t saved = 0;
    for (const CheckpointVariable& v : responses[k].variables()) {
      saved += v.shards_size();
    }
    if (saved != expected_shards_[k]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint at step ", position.global_step, ": parameter server ", k,
          " (", ps_[k]->address(), ") saved ", saved, " shards but holds ",
          expected_shards_[k],
          " in this job (it restarted?); the checkpoint was not committed"));
    }
  }

  if (replicas_ != nullptr) {
    SaveShardsResponse& replica = responses.emplace_back();
    if (absl::Status s =
            replicas_->Save(directory, position.global_step, &replica);
        !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("checkpoint at step ", position.global_step,
                                 ": the workers' replica: ", s.message()));
    }
  }
  return responses;
}

absl::StatusOr<std::string> JobCheckpointer::SaveInto(
    const JobPosition& position) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> directory = dir_.Prepare(position.global_step);
  if (absl::IsAlreadyExists(directory.status())) {
    // Asked twice at one step (a checkpoint right after the last epoch's),
    // or left by an earlier run: keep it if it is sound.
    const CheckpointRef ref{position.global_step,
                            dir_.PathFor(position.global_step), true};
    absl::StatusOr<CheckpointManifest> existing = dir_.Validate(ref);
    if (existing.ok()) {
      LOG(INFO) << "checkpoint " << ref.path << " already holds step "
                << position.global_step;
      return ref.path;
    }
    LOG(WARNING) << "checkpoint " << ref.path
                 << " is damaged and will be rewritten: "
                 << existing.status().message();
    if (absl::StatusOr<std::string> aside = dir_.SetAside(ref); !aside.ok()) {
      return aside.status();
    }
    directory = dir_.Prepare(position.global_step);
  }
  if (!directory.ok()) return directory.status();
  // A checkpoint at step 0 counts no step as trained, so no row push can
  // be missing from it: a worker that restarted between its configuration
  // and the job's first checkpoint must not fail the job at its start.
  if (replicas_ != nullptr && position.global_step > 0) {
    if (absl::Status s = replicas_->SettleRowPushes(); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<SaveShardsResponse>> responses =
      SaveShards(*directory, position);
  if (!responses.ok()) return responses.status();
  const CheckpointManifest manifest =
      ManifestOf(position, static_cast<int>(ps_.size()), *responses, job_);
  int64_t bytes = 0;
  for (const SaveShardsResponse& r : *responses) {
    bytes += r.file().size_bytes();
  }
  if (absl::Status s = dir_.Commit(manifest); !s.ok()) return s;
  if (absl::Status s = dir_.KeepLast(keep_); !s.ok()) {
    // The new checkpoint is complete; failing to prune is not fatal.
    LOG(WARNING) << "checkpoint " << *directory
                 << " written, but older ones could not be deleted: " << s;
  }
  LOG(INFO) << "checkpoint " << *directory << ": " << manifest.variables_size()
            << " variables, " << bytes << " bytes from " << ps_.size()
            << " parameter servers"
            << (replicas_ != nullptr ? " and the workers' replica" : "")
            << " in " << absl::FormatDuration(absl::Now() - start);
  return directory;
}

absl::StatusOr<ValidCheckpoint> JobCheckpointer::Latest(
    std::vector<std::string>* rejected) const {
  absl::StatusOr<ValidCheckpoint> latest = dir_.LatestValid(rejected);
  if (!latest.ok() && !absl::IsNotFound(latest.status())) return latest;
  absl::StatusOr<std::vector<CheckpointRef>> refs = dir_.List();
  if (!refs.ok()) return refs.status();
  for (const CheckpointRef& ref : *refs) {
    if (latest.ok() && ref.step <= latest->step) break;
    // Complete but damaged (LatestValid rejected it); an incomplete one is
    // an abandoned attempt that Prepare reuses and KeepLast removes.
    if (!ref.has_manifest) continue;
    if (absl::StatusOr<std::string> aside = dir_.SetAside(ref); !aside.ok()) {
      LOG(WARNING) << aside.status();
    }
  }
  return latest;
}

absl::StatusOr<std::optional<std::string>> JobCheckpointer::NewestComplete()
    const {
  absl::StatusOr<std::vector<CheckpointRef>> refs = dir_.List();
  if (!refs.ok()) return refs.status();
  for (const CheckpointRef& ref : *refs) {
    if (ref.has_manifest) return std::optional<std::string>(ref.path);
  }
  return std::optional<std::string>();
}

absl::Status JobCheckpointer::Restore(const ValidCheckpoint& checkpoint) {
  const absl::Time start = absl::Now();
  if (replicas_ != nullptr) {
    if (absl::Status s = replicas_->Restore(checkpoint); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("restoring ", checkpoint.path,
                                 " onto the workers' replicas: ", s.message()));
    }
  }
  std::vector<RestoreShardsResponse> responses(ps_.size());
  absl::Status s = ForEachServer(ps_.size(), [&](size_t k) {
    RestoreShardsRequest request;
    request.set_directory(checkpoint.path);
    *request.mutable_manifest() = checkpoint.manifest;
    return ps_[k]->RestoreShards(request, &responses[k]);
  });
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("restoring ", checkpoint.path,
                                               ": ", s.message()));
  }
  int64_t rows = 0;
  for (const RestoreShardsResponse& r : responses) rows += r.rows_restored();
  LOG(INFO) << "restored " << checkpoint.path << " (saved by "
            << checkpoint.manifest.num_ps() << " parameter servers) onto "
            << ps_.size() << ": " << rows << " rows in "
            << absl::FormatDuration(absl::Now() - start);
  return absl::OkStatus();
}

}  // namespace tessera
