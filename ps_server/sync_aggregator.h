#ifndef TESSERA_PS_SERVER_SYNC_AGGREGATOR_H_
#define TESSERA_PS_SERVER_SYNC_AGGREGATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace tessera {

// Synchronous training on one shard: gathers the gradients that workers
// push for one global step and releases their average exactly once, when
// `required` of them (all workers, or all but the backup workers) have
// arrived. Gradients for a step that was already released, or that a newer
// step overtook, are late: they are dropped and counted, never applied.
//
// Thread safety: all methods may be called concurrently.
class SyncAggregator {
 public:
  enum class Outcome {
    kAccumulated,  // kept; the step needs more gradients
    kReleased,     // this gradient completed the step: *average is set
    kLate,         // dropped
  };

  explicit SyncAggregator(int64_t num_elements);

  // Adds the gradient of global step `step`. InvalidArgument when the
  // size is wrong, required < 1, or a step's pushes disagree on required.
  absl::StatusOr<Outcome> Add(int64_t step, int required,
                              absl::Span<const float> grad,
                              std::vector<float>* average);

  int64_t dropped() const;
  // Forgets the pending step and the last step released, as if new: after
  // the shard was restored from a checkpoint, the job's global steps start
  // again from the checkpoint's, and those must not count as late.
  void Reset();
  // The last step released, -1 before the first.
  int64_t released_step() const;

 private:
  const int64_t num_elements_;
  mutable absl::Mutex mu_;
  int64_t pending_step_ ABSL_GUARDED_BY(mu_) = -1;
  int pending_required_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> sum_ ABSL_GUARDED_BY(mu_);
  int64_t released_step_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// The aggregators of a server's shards, made on a shard's first sync push.
//
// Thread safety: For may be called concurrently.
class SyncAggregators {
 public:
  // The aggregator of `shard`; `num_elements` sizes a new one.
  SyncAggregator* For(const std::string& shard, int64_t num_elements);
  // Late gradients dropped over all shards.
  int64_t dropped() const;
  // Reset() of every aggregator (RestoreShards).
  void ResetAll();

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<SyncAggregator>> map_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_SYNC_AGGREGATOR_H_
