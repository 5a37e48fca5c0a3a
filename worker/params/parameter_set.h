// The model's dense variables as a training step sees them, wherever they
// live: sharded on the parameter servers (ShardedParameters: pulled before
// a step, their gradients pushed after it) or replicated on every worker
// (MirroredParameters: kept in place, the gradients all-reduced and
// applied alike by every replica). A step is written once against this.

#ifndef TESSERA_WORKER_PARAMS_PARAMETER_SET_H_
#define TESSERA_WORKER_PARAMS_PARAMETER_SET_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/worker_service.pb.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

// Contract: values() and gradients() begin with the graph's dense
// variables, in the graph's order (a replica keeps its embedding tables
// after them). Pull makes values() the ones the step computes with; the
// backward pass writes the step's gradients into gradients(), or, when
// device_gradients() is not null, the gradients times the step's examples
// into that device memory; Push then sends or applies them, after which
// the buffers are the next step's to fill.
//
// Thread safety: one step at a time.
class ParameterSet {
 public:
  // What a step's Push needs besides the gradients.
  struct StepPush {
    // This worker's examples in the step; 0: none, its gradient is zero.
    int64_t examples = 0;
    // Sync: StepRequest.sync_scale, the weight of this worker's gradient
    // among the step's parts (0 or 1: unscaled). A replica weighs its
    // gradient by `examples` in the all-reduce instead.
    float scale = 1;
    // The global step the push belongs to (null: untagged).
    const SyncPush* sync = nullptr;
  };

  virtual ~ParameterSet() = default;

  // The values for a step; in sync mode (`sync_step` set) the values
  // after every global step before `sync_step`.
  virtual absl::Status Pull(std::optional<int64_t> sync_step) = 0;
  // Sends this step's gradients (the servers apply them), or all-reduces
  // and applies them (replicas); fills what the step reports about it
  // into `response` (staleness, late shards, the replica's checksum).
  virtual absl::Status Push(const StepPush& step, StepResponse* response) = 0;

  virtual std::vector<absl::Span<const float>> values() const = 0;
  virtual std::vector<absl::Span<float>> gradients() = 0;
  // Device memory of dense-gradient-size floats plus room for Push's
  // bookkeeping, where the backward pass leaves the weighted gradients
  // (Graph::TrainStepOnDevice) when the set sums them there; null: the
  // step writes gradients() on the host.
  virtual float* device_gradients() { return nullptr; }
  // Whether every worker takes part in every step's Push, a worker
  // without examples too (an all-reduce among the replicas).
  virtual bool collective() const { return false; }
};

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_PARAMETER_SET_H_
