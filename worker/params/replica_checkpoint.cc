#include "worker/params/replica_checkpoint.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/checkpoint/checkpoint_dir.h"
#include "ps_server/embedded/embedded_shards.h"

namespace tessera {
namespace {

// The replica's variables as one parameter server would hold them, each
// whole on one shard with the optimizer that trains it in the replica.
absl::Status HoldLikeAServer(const MirroredParameters& replica,
                             EmbeddedShards* shards) {
  for (const VariableDef& variable : replica.variables()) {
    absl::StatusOr<int> added = shards->Add(
        variable, variable.update_rule.value_or(replica.optimizer()));
    if (!added.ok()) return added.status();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveReplica(const MirroredParameters& replica,
                         const std::string& directory,
                         SaveShardsResponse* response) {
  EmbeddedShards shards;
  if (absl::Status s = HoldLikeAServer(replica, &shards); !s.ok()) return s;
  const std::vector<absl::Span<const float>> values = replica.values();
  for (size_t v = 0; v < values.size(); ++v) {
    EmbeddedShards::State state;
    state.values.assign(values[v].begin(), values[v].end());
    state.slots = replica.slots(v);
    state.updates = replica.updates();
    if (absl::Status s = shards.SetState(v, std::move(state)); !s.ok()) {
      return s;
    }
  }
  return shards.SaveShards(directory, kReplicaCheckpointFileName,
                           kReplicaCheckpointPs, response);
}

absl::Status RestoreReplica(const CheckpointManifest& manifest,
                            const std::string& directory,
                            MirroredParameters* replica) {
  EmbeddedShards shards;
  if (absl::Status s = HoldLikeAServer(*replica, &shards); !s.ok()) return s;
  if (absl::Status s = shards.Restore(manifest, directory); !s.ok()) return s;
  // Read everything before changing anything.
  std::vector<EmbeddedShards::State> states;
  int64_t updates = 0;
  for (size_t v = 0; v < replica->variables().size(); ++v) {
    absl::StatusOr<EmbeddedShards::State> state = shards.GetState(v);
    if (!state.ok()) return state.status();
    // Equal for a replica's variables; an async job's shards may differ,
    // and the replica has one count for all.
    updates = std::max(updates, state->updates);
    states.push_back(*std::move(state));
  }
  for (size_t v = 0; v < states.size(); ++v) {
    absl::Span<float> values = replica->mutable_values(v);
    std::copy(states[v].values.begin(), states[v].values.end(), values.begin());
    replica->mutable_slots(v) = std::move(states[v].slots);
  }
  replica->set_updates(updates);
  return absl::OkStatus();
}

}  // namespace tessera
