#ifndef TESSERA_WORKER_PARAMS_MIRRORED_PARAMETERS_H_
#define TESSERA_WORKER_PARAMS_MIRRORED_PARAMETERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "common/optimizer/gradient_clipping.h"
#include "common/optimizer/optimizer.h"
#include "proto/job.pb.h"
#include "worker/backend/backend.h"
#include "worker/backend/host_memory.h"
#include "worker/collective/all_reducer.h"
#include "worker/params/parameter_set.h"

namespace tessera {

// A full replica of the model's variables for mirrored training (TF's
// MirroredStrategy): every worker holds all of them, initialised from the
// same initializers, and applies the same all-reduced gradient with the
// same optimizer, so the replicas stay bit-identical without ever sending
// parameters. A variable with an update rule of its own (BatchNorm's moving
// statistics) applies its rule to the all-reduced value instead: the
// weighted mean of every replica's batch moments.
//
// The gradients of all variables live in one contiguous buffer followed by
// one weight element, so a single all-reduce carries a whole step: each
// worker writes weight * gradient (weight = its examples in the step) and
// its weight, and after the sum the gradient of the global batch's mean
// loss is sum / total weight, whatever the split of the batch.
//
// A table (a sparse variable: a replicated embedding table) also has one
// element per row between the gradients and the weight, which a worker
// sets non-zero for the rows its batch touched (touched_rows), so after
// the sum every replica knows the rows some worker touched, and steps the
// table as a server steps a shard of it (common/optimizer/table_step.h):
// lazily, only those rows, or densely, every row, as the table's
// optimizer's table_updates says.
//
// As a step's ParameterSet (with set_collective): Pull has nothing to
// fetch, Push weighs the gradients by the step's examples, all-reduces
// them among the replicas (on the device when the all-reducer sums there
// and the graph can leave its gradients there) and applies the sum.
//
// Thread safety: one step at a time.
class MirroredParameters final : public ParameterSet {
 public:
  // The values and the reduce buffer come from `host_memory` (the
  // backend's: pinned on a GPU, so they travel to and from it without
  // staging; null: plain memory), which must outlive this.
  static absl::StatusOr<std::unique_ptr<MirroredParameters>> Create(
      const std::vector<VariableDef>& variables,
      const OptimizerConfig& optimizer, HostAllocator* host_memory = nullptr);

  // The all-reduce Push runs among the replicas (`all_reducer`: this
  // worker's rank), the backend whose device memory device_gradients()
  // is, and whether the step's graph can leave its gradients on the
  // device (`device_sum`: a model without tables). Before the first Push;
  // both must outlive this.
  struct Collective {
    AllReducer* all_reducer = nullptr;
    Backend* backend = nullptr;
    bool device_sum = false;
  };
  void set_collective(const Collective& collective) {
    collective_ = collective;
  }

  // ParameterSet. values() and gradients() are every variable's (the kept
  // tables after the dense ones); gradients() are views into the reduce
  // buffer.
  absl::Status Pull(std::optional<int64_t> sync_step) override;
  absl::Status Push(const StepPush& step, StepResponse* response) override;
  std::vector<absl::Span<const float>> values() const override;
  std::vector<absl::Span<float>> gradients() override;
  // Made on first use, when the all-reducer sums on the device (NCCL, once
  // negotiated) and the collective allows it.
  float* device_gradients() override;
  bool collective() const override { return true; }
  // Variable v's touched-row marks in the reduce buffer, one per row
  // (empty unless v is a table): the caller sets those of its batch's rows
  // non-zero and the rest zero (ReplicatedTables::Scatter).
  absl::Span<float> touched_rows(int v);

  // Scales the gradients by `weight` and stores the weight after them.
  void SetWeight(double weight);
  // Zero gradients and weight: a replica with no examples this step.
  void ZeroGradients();
  // Gradients followed by the weight: what the all-reduce sums.
  absl::Span<float> reduce_buffer() {
    return absl::MakeSpan(reduce_.data(), reduce_.size());
  }

  // Applies sum / total weight with the optimizer, clipped first as the
  // optimizer's clipping says (OptimizerConfig.clipping: the global batch's
  // mean gradient, moving statistics left out). A non-finite sum (some
  // worker's gradient was not finite) is refused by every replica alike,
  // naming the variable, and nothing changes; a total weight of zero
  // changes nothing.
  absl::Status ApplyReduced();

  // What Create was given, and the replica's state for its checkpoints
  // (worker/params/replica_checkpoint.h): variable v's values, its
  // optimizer's slots (in slot order) and the update count, which a
  // restore sets together. REQUIRES: no step in progress.
  const std::vector<VariableDef>& variables() const { return defs_; }
  const OptimizerConfig& optimizer() const { return optimizer_; }
  absl::Span<float> mutable_values(int v) {
    return absl::MakeSpan(values_[v].data(), values_[v].size());
  }
  std::vector<std::vector<float>>& mutable_slots(int v) { return slots_[v]; }
  const std::vector<std::vector<float>>& slots(int v) const {
    return slots_[v];
  }
  void set_updates(int64_t updates) { updates_ = updates; }

  // CRC32C of every value, to check that replicas are identical.
  uint32_t Checksum() const;
  int64_t updates() const { return updates_; }

 private:
  MirroredParameters() = default;

  // The all-reduce of Push from device_reduce_ (device_gradients() was
  // used) or from the host's reduce buffer.
  absl::Status ReduceOnDevice(int64_t examples);
  absl::Status ReduceOnHost(int64_t examples);

  Collective collective_;
  DeviceArray<float> device_reduce_;

  std::vector<VariableDef> defs_;
  OptimizerConfig optimizer_;
  std::vector<std::string> names_;
  std::vector<HostArray<float>> values_;
  std::vector<int64_t> offsets_;  // of each variable in reduce_
  // Of each table's touched-row marks in reduce_; -1: not a table.
  std::vector<int64_t> touched_offsets_;
  std::vector<float> table_scratch_;  // a dense table update's gradient
  HostArray<float> reduce_;
  std::vector<std::vector<std::vector<float>>> slots_;  // [variable][slot]
  std::vector<std::unique_ptr<Optimizer>> optimizers_;
  std::vector<Optimizer*> optimizer_of_;  // per variable
  GradientClipPlan clip_plan_;            // optimizer_'s clipping
  int64_t updates_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_MIRRORED_PARAMETERS_H_
