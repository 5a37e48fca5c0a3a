#include "ps_server/embedded/embedded_shards.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "proto/checkpoint.pb.h"
#include "proto/ps_service.pb.h"
#include "ps_server/row_table.h"
#include "ps_server/shard.h"
#include "ps_server/shard_checkpoint.h"
#include "ps_server/shard_store.h"

namespace tessera {

struct EmbeddedShards::Held {
  ShardStore store;
  // Per variable, by index: its fixed-size shard (null for a growing
  // table) and its rows, for either kind.
  std::vector<std::shared_ptr<Shard>> shards;
  std::vector<std::shared_ptr<RowTable>> rows;
};

EmbeddedShards::EmbeddedShards() : held_(std::make_unique<Held>()) {}
EmbeddedShards::~EmbeddedShards() = default;

absl::StatusOr<int> EmbeddedShards::Add(const VariableDef& variable,
                                        const OptimizerConfig& optimizer) {
  CreateShardsRequest request;
  *request.add_shards() = WholeShardOf(variable);
  *request.mutable_optimizer() = optimizer;
  CreateShardsResponse response;
  if (absl::Status s = held_->store.Create(request, &response); !s.ok()) {
    return s;
  }
  const ShardDef& def = request.shards(0);
  absl::StatusOr<std::shared_ptr<RowTable>> rows =
      held_->store.FindRows(def.name());
  if (!rows.ok()) return rows.status();
  std::shared_ptr<Shard> shard;
  if (!def.hash_table()) {
    absl::StatusOr<std::shared_ptr<Shard>> found =
        held_->store.Find(def.name());
    if (!found.ok()) return found.status();
    shard = *std::move(found);
  }
  held_->shards.push_back(std::move(shard));
  held_->rows.push_back(*std::move(rows));
  return static_cast<int>(held_->shards.size()) - 1;
}

int64_t EmbeddedShards::num_elements(int v) const {
  return held_->shards[v]->num_elements();
}

void EmbeddedShards::ReadValues(int v, absl::Span<float> out) const {
  const Shard& shard = *held_->shards[v];
  shard.ReadBytes(0, shard.byte_size(), reinterpret_cast<char*>(out.data()));
}

absl::Status EmbeddedShards::SetValues(int v, absl::Span<const float> values) {
  Shard* shard = held_->shards[v].get();
  if (shard == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("variable ", held_->rows[v]->def().name(),
                     " is a growing table: it has no values to set"));
  }
  ShardState state = shard->CopyState();
  state.values.assign(values.begin(), values.end());
  return shard->RestoreState(std::move(state));
}

void EmbeddedShards::ApplyGradient(int v, absl::Span<const float> gradient) {
  held_->shards[v]->ApplyDense(gradient);
}

int64_t EmbeddedShards::row_elements(int v) const {
  return held_->rows[v]->row_elements();
}

absl::Status EmbeddedShards::CheckIds(int v,
                                      absl::Span<const int64_t> ids) const {
  return held_->rows[v]->CheckIds(ids);
}

void EmbeddedShards::ReadRows(int v, absl::Span<const int64_t> ids,
                              float* out) {
  held_->rows[v]->Read(ids, out);
}

void EmbeddedShards::ApplyRows(int v, absl::Span<const int64_t> ids,
                               absl::Span<const float> gradients) {
  held_->rows[v]->Apply(ids, gradients);
}

absl::StatusOr<EmbeddedShards::State> EmbeddedShards::GetState(int v) const {
  const Shard* shard = held_->shards[v].get();
  if (shard == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("variable ", held_->rows[v]->def().name(),
                     " is a growing table: it has no fixed state"));
  }
  ShardState copy = shard->CopyState();
  State state;
  state.values = std::move(copy.values);
  state.slots = std::move(copy.slots);
  state.updates = copy.updates;
  return state;
}

absl::Status EmbeddedShards::SetState(int v, State state) {
  Shard* shard = held_->shards[v].get();
  if (shard == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("variable ", held_->rows[v]->def().name(),
                     " is a growing table: it has no fixed state"));
  }
  ShardState next;
  next.values = std::move(state.values);
  next.slots = std::move(state.slots);
  next.version = state.updates;
  next.updates = state.updates;
  return shard->RestoreState(std::move(next));
}

absl::Status EmbeddedShards::SaveShards(const std::string& directory,
                                        const std::string& file_name,
                                        int writer,
                                        SaveShardsResponse* response) const {
  return SaveShardCheckpointAs(held_->store, directory, file_name, writer,
                               response);
}

absl::Status EmbeddedShards::Restore(const CheckpointManifest& manifest,
                                     const std::string& directory) {
  RestoreShardsResponse response;
  return RestoreShardCheckpoint(manifest, directory, &held_->store, &response);
}

absl::StatusOr<std::string> EmbeddedShards::SaveCheckpoint(
    const JobConfig& job, const std::string& root, int64_t step,
    int epoch) const {
  CheckpointDir dir(root);
  absl::StatusOr<std::string> folder = dir.Prepare(step);
  if (!folder.ok()) return folder.status();
  SaveShardsResponse saved;
  if (absl::Status s = SaveShardCheckpoint(held_->store, *folder, 0, &saved);
      !s.ok()) {
    return s;
  }
  CheckpointManifest manifest;
  manifest.set_global_step(step);
  manifest.set_epoch(epoch);
  manifest.set_num_ps(1);
  *manifest.mutable_optimizer() = job.optimizer();
  *manifest.mutable_job() = job;
  manifest.set_created_unix_micros(absl::ToUnixMicros(absl::Now()));
  *manifest.add_files() = saved.file();
  for (CheckpointVariable& v : *saved.mutable_variables()) {
    *v.mutable_partitioner() = job.partitioner();
    *manifest.add_variables() = std::move(v);
  }
  if (absl::Status s = dir.Commit(manifest); !s.ok()) return s;
  return *folder;
}

}  // namespace tessera
