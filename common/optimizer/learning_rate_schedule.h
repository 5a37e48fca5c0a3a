// The learning rate of each update of an optimizer: OptimizerConfig's
// learning_rate and schedule (proto/job.proto's LearningRateSchedule holds
// the formulas). Its one owner: the optimizers (servers' shards and
// tables, workers' replicas), the coordinator's progress line and metrics
// and the flags' validation all ask it, so every place computes the same
// rate for the same update.
#ifndef TESSERA_COMMON_OPTIMIZER_LEARNING_RATE_SCHEDULE_H_
#define TESSERA_COMMON_OPTIMIZER_LEARNING_RATE_SCHEDULE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"

namespace tessera {

// A validated schedule; cheap to copy. Rate() is thread-safe.
class LearningRate {
 public:
  // The same rate on every update.
  explicit LearningRate(float rate);

  // The rate of `config` (its learning_rate and schedule); errors name the
  // bad field under `field` ("optimizer", "embedding_optimizer",
  // "table_optimizers[\"x\"]").
  static absl::StatusOr<LearningRate> Create(
      const OptimizerConfig& config, absl::string_view field = "optimizer");

  // The rate of update `t`, the 1-based count of the optimizer's updates
  // including this one (Keras' step t - 1). t < 1 reads as 1.
  float Rate(int64_t t) const;

  // Whether Rate is the same for every t.
  bool constant() const { return constant_; }

 private:
  LearningRate(const LearningRateSchedule& schedule, float peak);
  double Compute(int64_t k) const;

  LearningRateSchedule schedule_;
  double peak_;
  bool constant_;
  // Rate() keeps its last answer per thread under this id, so that the
  // per-row updates of a table push compute it once.
  uint64_t id_;
};

// Validates `schedule`; errors name the field as `prefix`.<name>
// ("optimizer.schedule.decay_steps", "--lr_schedule.decay_steps").
absl::Status ValidateLearningRateSchedule(const LearningRateSchedule& schedule,
                                          absl::string_view prefix);

// A schedule written as text, the flags' form: the decay (constant,
// piecewise, exponential, cosine, polynomial), then comma-separated
// key=value pairs named as LearningRateSchedule's fields, lists (boundaries,
// values) colon-separated, booleans (staircase, cycle) as true/false or
// the bare name:
//   "cosine,warmup_steps=500,decay_steps=20000,alpha=0.01"
//   "piecewise,boundaries=1000:5000,values=0.1:0.01:0.001"
// InvalidArgument naming the bad part. Not validated (the optimizer is).
absl::StatusOr<LearningRateSchedule> ParseLearningRateSchedule(
    absl::string_view spec);

// Multiplies every rate of `config` by `factor` (learning_rate, the
// piecewise values and the polynomial decay's end rate; not the warm-up's
// starting rate, so a warm-up climbs from the unscaled rate to the scaled
// one as Goyal et al.'s gradual warm-up does). The linear scaling rule.
void ScaleLearningRate(double factor, OptimizerConfig* config);

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_LEARNING_RATE_SCHEDULE_H_
