// The learning rates of a job as the coordinator sees them: the linear
// scaling rule applied to the job's optimizers once at start-up, and the
// rate each optimizer applies at a point of the job, for the progress
// line, tessera_ctl status and the run folder's metrics. The rates
// themselves come from common/optimizer/learning_rate_schedule.h, the
// code the servers and workers apply them with.
#ifndef TESSERA_COORDINATOR_LEARNING_RATES_H_
#define TESSERA_COORDINATOR_LEARNING_RATES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/optimizer/learning_rate_schedule.h"
#include "common/training_mode.h"
#include "proto/job.pb.h"

namespace tessera {

// Applies job->lr_scaling on a cluster of `num_workers` workers in `mode`
// (proto/job.proto says which optimizers scale; a table left on the
// dense optimizer that must not scale gets its own unscaled copy of it as
// embedding_optimizer). Returns the line the log says it with ("" for no
// scaling). InvalidArgument, naming the field, for an unknown rule, a
// reference batch < 0, or "linear" in a mode without a global batch
// (async, ssp).
absl::StatusOr<std::string> ApplyLearningRateScaling(const TrainingMode& mode,
                                                     int num_workers,
                                                     JobConfig* job);

// The rates of the latest update of a job's dense optimizer and, when
// the job gives the tables their own (embedding_optimizer), of theirs.
// What t is: the optimizer's count of updates (docs/optimizers.md). The
// coordinator's stand-ins: the global steps done where an update averages
// a global step (lockstep modes for the dense optimizer; sync and
// hybrid:sync for the tables), otherwise the worker steps done (in async
// every worker step pushes every dense shard once, so that is a dense
// shard's t; a table shard counts only the pushes that reach it).
class JobLearningRates {
 public:
  static absl::StatusOr<JobLearningRates> Create(const JobConfig& job,
                                                 const TrainingMode& mode);

  struct Rates {
    float dense = 0;
    std::optional<float> embedding;  // the tables' own optimizer's
  };
  Rates At(int64_t worker_steps, int64_t global_steps) const;

  // Whether any rate moves during the job (a schedule).
  bool scheduled() const;

 private:
  JobLearningRates(LearningRate dense, std::optional<LearningRate> embedding,
                   const TrainingMode& mode)
      : dense_(dense), embedding_(embedding), mode_(mode) {}

  LearningRate dense_;
  std::optional<LearningRate> embedding_;
  TrainingMode mode_;
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_LEARNING_RATES_H_
