#ifndef TESSERA_COORDINATOR_STEP_PLAN_H_
#define TESSERA_COORDINATOR_STEP_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "coordinator/data_plan.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// The steps of a job's epochs whatever its data: example ids of a data set
// the workers hold in memory (DataPlan), or runs of streamed shards
// (StreamPlan). Both are reproducible: the plan after e calls of NextEpoch
// is the same in every run, which is how a resumed job finds its place.
//
// Thread safety: one thread.
class StepPlan {
 public:
  virtual ~StepPlan() = default;
  // Steps of one epoch of a one-pass plan, or of a fixed-step plan.
  virtual int64_t steps_per_epoch() const = 0;
  // The steps of the next epoch, shards interleaved round-robin.
  virtual std::vector<PlannedStep> NextEpoch() = 0;
  // Writes what `step` reads into `request`: its example ids and shard, or
  // its run of the stream.
  virtual void Describe(const PlannedStep& step,
                        StepRequest* request) const = 0;
  // The digest of one pass over the training set (common/example_digest.h):
  // what a one-pass epoch's steps must add up to.
  virtual uint64_t OnePassDigest() const = 0;
};

std::unique_ptr<StepPlan> PlanOfExamples(DataPlan plan);
std::unique_ptr<StepPlan> PlanOfStreams(StreamPlan plan);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_STEP_PLAN_H_
