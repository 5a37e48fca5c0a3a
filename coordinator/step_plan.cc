#include "coordinator/step_plan.h"

#include <utility>

#include "absl/types/span.h"
#include "common/byte_codec.h"
#include "common/example_digest.h"

namespace tessera {
namespace {

class ExamplePlan final : public StepPlan {
 public:
  explicit ExamplePlan(DataPlan plan) : plan_(std::move(plan)) {}
  int64_t steps_per_epoch() const override { return plan_.steps_per_epoch(); }
  std::vector<PlannedStep> NextEpoch() override { return plan_.NextEpoch(); }
  void Describe(const PlannedStep& step, StepRequest* request) const override {
    AppendRaw(absl::MakeConstSpan(step.example_ids),
              request->mutable_example_ids());
    request->set_shard_begin(plan_.shards()[step.shard].begin);
    request->set_shard_end(plan_.shards()[step.shard].end);
  }
  uint64_t OnePassDigest() const override {
    uint64_t digest = 0;
    for (const DataShard& shard : plan_.shards()) {
      digest += DigestOfIndices(shard.begin, shard.end);
    }
    return digest;
  }

 private:
  DataPlan plan_;
};

class StreamedPlan final : public StepPlan {
 public:
  explicit StreamedPlan(StreamPlan plan) : plan_(std::move(plan)) {}
  int64_t steps_per_epoch() const override { return plan_.steps_per_epoch(); }
  std::vector<PlannedStep> NextEpoch() override {
    std::vector<PlannedStep> steps;
    for (const PlannedStreamStep& s : plan_.NextEpoch()) {
      PlannedStep step;
      step.shard = s.shard;
      step.stream = s;
      steps.push_back(std::move(step));
    }
    return steps;
  }
  void Describe(const PlannedStep& step, StepRequest* request) const override {
    if (step.stream.count == 0) return;  // padding: no examples
    StreamStep* stream = request->mutable_stream();
    stream->set_shard(step.stream.shard);
    stream->set_pass(step.stream.pass);
    stream->set_first(step.stream.first);
    stream->set_count(step.stream.count);
  }
  uint64_t OnePassDigest() const override {
    uint64_t digest = 0;
    for (size_t s = 0; s < plan_.shard_sizes().size(); ++s) {
      digest +=
          DigestOfStreamRun(static_cast<int32_t>(s), 0, plan_.shard_sizes()[s]);
    }
    return digest;
  }

 private:
  StreamPlan plan_;
};

}  // namespace

std::unique_ptr<StepPlan> PlanOfExamples(DataPlan plan) {
  return std::make_unique<ExamplePlan>(std::move(plan));
}

std::unique_ptr<StepPlan> PlanOfStreams(StreamPlan plan) {
  return std::make_unique<StreamedPlan>(std::move(plan));
}

}  // namespace tessera
