#ifndef TESSERA_COORDINATOR_DATA_PLAN_H_
#define TESSERA_COORDINATOR_DATA_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

// A contiguous range of training examples owned by one worker.
struct DataShard {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// A step of a streamed data set (DataConfig.train_files): positions
// [first, first + count) of pass `pass` of shard `shard`'s stream, which
// the worker reads with data/stream/stream_reader.h. The coordinator
// sends it as StepRequest.stream (proto StreamStep, the same four fields).
struct PlannedStreamStep {
  int shard = 0;
  int64_t pass = 0;
  int64_t first = 0;
  int64_t count = 0;
};

// The examples of one step, all from one shard: example ids (DataPlan) or
// a run of the shard's stream (StreamPlan, through coordinator/step_plan.h).
struct PlannedStep {
  int shard = 0;
  std::vector<int64_t> example_ids;
  PlannedStreamStep stream;  // count 0: not streamed
  // A step without examples (a mirrored replica's padding in a round).
  bool empty() const { return example_ids.empty() && stream.count == 0; }
  // The examples it reads.
  int64_t size() const {
    return stream.count > 0 ? stream.count
                            : static_cast<int64_t>(example_ids.size());
  }
};

// Decides which examples each step reads. The training set is split into
// one contiguous shard per worker; each epoch every shard is shuffled with
// a seed derived from (seed, shard, pass), so a plan is reproducible and a
// step re-run elsewhere reads the same examples.
//
// With steps_per_epoch == 0 an epoch is exactly one pass: every example is
// in exactly one step (the last step of a shard may be short). Otherwise an
// epoch is steps_per_epoch full batches taken round-robin over the shards,
// each shard continuing where it stopped and reshuffling when it wraps.
class DataPlan {
 public:
  static absl::StatusOr<DataPlan> Create(int64_t num_examples, int num_shards,
                                         int64_t batch_size,
                                         int64_t steps_per_epoch,
                                         uint64_t seed);

  const std::vector<DataShard>& shards() const { return shards_; }
  // Steps of one epoch of a one-pass plan, or of a fixed-step plan.
  int64_t steps_per_epoch() const;

  // The steps of the next epoch, shards interleaved round-robin.
  std::vector<PlannedStep> NextEpoch();

 private:
  DataPlan() = default;
  std::vector<int64_t> Permutation(int shard, int64_t pass) const;
  std::vector<int64_t> TakeBatch(int shard);

  std::vector<DataShard> shards_;
  int64_t batch_size_ = 1;
  int64_t fixed_steps_ = 0;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
  // Fixed-step plans: per shard, the current permutation and position.
  std::vector<std::vector<int64_t>> order_;
  std::vector<int64_t> cursor_;
  std::vector<int64_t> pass_;
};

// Plans the steps of streamed shards of given sizes (in records). Like
// DataPlan, without a permutation: the worker's stream fixes the order of
// a pass from (shard's files, seed, pass), so a plan names position
// ranges, and a step re-run or restored from a checkpoint reads the same
// examples.
//
// With steps_per_epoch == 0 epoch e is pass e of every shard, each shard's
// positions in batch_size runs (the last one short), shards interleaved
// round-robin. Otherwise an epoch is steps_per_epoch steps round-robin over
// the shards, each continuing where it stopped; a step never spans two
// passes, so the one that ends a pass may be short.
class StreamPlan {
 public:
  // Where a shard's stream is; part of a checkpoint of a fixed-step plan.
  struct Cursor {
    int64_t pass = 0;
    int64_t position = 0;
  };

  static absl::StatusOr<StreamPlan> Create(std::vector<int64_t> shard_sizes,
                                           int64_t batch_size,
                                           int64_t steps_per_epoch);

  int64_t steps_per_epoch() const;
  std::vector<PlannedStreamStep> NextEpoch();
  // The examples of each shard's stream.
  const std::vector<int64_t>& shard_sizes() const { return sizes_; }

  // The state after the epochs planned so far, and its restoration: a
  // coordinator restarted from a checkpoint restores (epoch, cursors) and
  // plans the same steps as before.
  int64_t epoch() const { return epoch_; }
  const std::vector<Cursor>& cursors() const { return cursors_; }
  absl::Status Restore(int64_t epoch, std::vector<Cursor> cursors);

 private:
  StreamPlan() = default;
  PlannedStreamStep Take(int shard);

  std::vector<int64_t> sizes_;
  int64_t batch_size_ = 1;
  int64_t fixed_steps_ = 0;
  int64_t epoch_ = 0;
  std::vector<Cursor> cursors_;  // fixed-step plans
};

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_DATA_PLAN_H_
