#ifndef TESSERA_WORKER_PARAMS_SHARDED_PARAMETERS_H_
#define TESSERA_WORKER_PARAMS_SHARDED_PARAMETERS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "google/protobuf/repeated_field.h"
#include "proto/worker_service.pb.h"
#include "ps_server/client/ps_client.h"
#include "worker/backend/host_memory.h"
#include "worker/params/parameter_set.h"

namespace tessera {

// A worker's view of the model's variables: one host buffer per variable
// for values and one for gradients, and the knowledge of which parameter
// server holds which rows. A shard is a row range of its variable, so it is
// pulled straight into its slice of the variable's buffer. As a step's
// ParameterSet: Pull is PullAll, Push scales the gradients by the step's
// sync scale and pushes them (PushAll), reporting the staleness and the
// late shards.
//
// Thread safety: one step at a time.
class ShardedParameters final : public ParameterSet {
 public:
  // `clients[k]` talks to ps task k and must outlive this object. Every
  // model variable must have a placement of the same shape whose shards
  // tile its rows. The value and gradient buffers come from `host_memory`
  // (the backend's: pinned on a GPU, so pulled values go to the device
  // without staging; null: plain memory), which must outlive this.
  //
  // With `borrowed` (one value and one gradient span per variable, each of
  // the variable's size, InvalidArgument otherwise) the buffers are those
  // spans instead, which must outlive this: the graph's own buffers where
  // the device is the host (Graph::HostVisibleValues), so pulled values
  // land where the graph reads them and pushed gradients go out from
  // where it wrote them, with no copy in between.
  struct Borrowed {
    std::vector<absl::Span<float>> values, grads;
  };
  static absl::StatusOr<std::unique_ptr<ShardedParameters>> Create(
      const std::vector<VariableDef>& variables,
      const google::protobuf::RepeatedPtrField<VariablePlacement>& placements,
      std::vector<PsClient*> clients, HostAllocator* host_memory = nullptr,
      const Borrowed* borrowed = nullptr);

  // Pulls every shard, all parameter servers in parallel; in sync mode
  // (`sync_step` set) the values after every step before `sync_step`.
  absl::Status PullAll(std::optional<int64_t> sync_step = std::nullopt);
  // What the parameter servers said about a push.
  struct PushOutcome {
    // Async: per shard, updates by others between this worker's pull and
    // its own update.
    std::vector<int64_t> staleness;
    // Sync: shards where the gradient came too late for its step.
    int late_shards = 0;
  };
  // Pushes the gradient buffers, all parameter servers in parallel; in
  // sync mode (sync != nullptr) as the gradient of one global step.
  absl::Status PushAll(const SyncPush* sync, PushOutcome* outcome);

  // ParameterSet.
  absl::Status Pull(std::optional<int64_t> sync_step) override;
  absl::Status Push(const StepPush& step, StepResponse* response) override;
  std::vector<absl::Span<const float>> values() const override;
  std::vector<absl::Span<float>> gradients() override;

 private:
  // What one parameter server is asked for in a step.
  struct ServerGroup {
    PsClient* client = nullptr;
    std::vector<std::string> shards;
    std::vector<absl::Span<float>> values;
    std::vector<absl::Span<const float>> grads;
    std::vector<int64_t> versions;
    PushResponse response;
  };

  ShardedParameters() = default;

  // The shards of the variable just added (the last of values_ and
  // grads_) into the groups of their servers; InvalidArgument names a
  // placement whose shards do not tile the variable's rows.
  absl::Status AddShards(const std::string& name,
                         const std::vector<int64_t>& shape,
                         const VariablePlacement& placement);

  // Owned buffers (none when borrowed), and the views every call uses.
  std::vector<HostArray<float>> owned_values_, owned_grads_;
  std::vector<absl::Span<float>> values_, grads_;
  std::vector<ServerGroup> groups_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_SHARDED_PARAMETERS_H_
