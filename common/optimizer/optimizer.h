#ifndef TESSERA_COMMON_OPTIMIZER_OPTIMIZER_H_
#define TESSERA_COMMON_OPTIMIZER_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/optimizer/learning_rate_schedule.h"
#include "proto/job.pb.h"

namespace tessera {

// Which update an Apply makes. `count` is the 1-based count of updates the
// shard (table, replica) has received, this one included: Adam's bias
// correction and the slots' history follow it. `schedule` is the update's
// step on the learning-rate schedule: the same number, except for an
// asynchronous push, which carries its worker step's own number (the
// schedule then follows the job's steps, not the arrival order at one
// shard, and a table shard that few pushes touch keeps the dense rate).
// One number converts to both.
struct UpdateStep {
  UpdateStep(int64_t t) : count(t), schedule(t) {}  // NOLINT: implicit
  UpdateStep(int64_t count, int64_t schedule)
      : count(count), schedule(schedule) {}
  int64_t count;
  int64_t schedule;
};

// A server-side optimizer. It is stateless itself: the state ("slots", each
// as large as the values) belongs to the shard, so one optimizer serves
// every shard of a server. Apply is called with the shard's lock held and
// must not fail: gradients are validated before it is called.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Number of slot arrays this optimizer needs.
  virtual int num_slots() const = 0;

  // Floats slot `slot` holds per row of `dim` values: `dim` for the
  // element-wise optimizers, 1 for a row-wise one (rowwise_adagrad), whose
  // slots are smaller than the values. REQUIRES: 0 <= slot < num_slots().
  virtual int64_t slot_row_elements(int slot, int64_t dim) const { return dim; }

  // True when Apply's n elements must be exactly one row of a table, its
  // slots slot_row_elements(k, n) floats: a table is then applied row by
  // row, and a dense variable refuses the optimizer.
  virtual bool row_wise() const { return false; }

  // The value every element of slot `slot` starts at (Adagrad's and FTRL's
  // accumulators start above zero). REQUIRES: 0 <= slot < num_slots().
  virtual float slot_initial_value(int slot) const { return 0.0f; }

  virtual std::string name() const = 0;

  // The name slot `slot` is saved under in a checkpoint (Keras' slot names:
  // "momentum", "m", "v", "accumulator", "linear"), so a restore can tell
  // that the optimizer changed. REQUIRES: 0 <= slot < num_slots().
  virtual std::string slot_name(int slot) const = 0;

  // Updates values[0, n) from grad[0, n) and slots[k][0, n). `t` says
  // which update this is (UpdateStep). Every Apply starts with
  // BeginUpdate, which gives it the scheduled rate of t.schedule and
  // applies the weight decay. An
  // embedding table's update goes through ApplyTableStep
  // (common/optimizer/table_step.h), which calls it per touched row or on
  // the whole table as table_updates() says.
  virtual void Apply(float* values, const float* grad, float* const* slots,
                     int64_t n, UpdateStep t) const = 0;

  // The rate of each update (OptimizerConfig.learning_rate and schedule).
  const LearningRate& learning_rate() const { return rate_; }
  void set_learning_rate(const LearningRate& rate) { rate_ = rate; }

  // OptimizerConfig.weight_decay: decoupled, scaled by the update's rate.
  float weight_decay() const { return weight_decay_; }
  void set_weight_decay(float weight_decay) { weight_decay_ = weight_decay; }

  // Which rows of a table one update moves (OptimizerConfig.table_updates).
  TableUpdates table_updates() const { return table_updates_; }
  void set_table_updates(TableUpdates updates) { table_updates_ = updates; }

 protected:
  Optimizer() : rate_(0.0f) {}
  explicit Optimizer(float learning_rate) : rate_(learning_rate) {}

  // The first thing every Apply does: returns the rate of update `t`
  // (learning_rate().Rate(t.schedule)) after shrinking values[0, n) by the
  // weight decay at that rate, w -= w * weight_decay * lr (Keras 3 decays
  // before the optimizer's step, in that order of the product).
  float BeginUpdate(float* values, int64_t n, UpdateStep t) const;

 private:
  TableUpdates table_updates_ = TABLE_UPDATES_LAZY;
  LearningRate rate_;
  float weight_decay_ = 0;
};

// Builds the optimizer named by `config`; errors name the bad field.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(
    const OptimizerConfig& config);

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_OPTIMIZER_H_
