#ifndef TESSERA_PS_SERVER_SYNC_STEPS_H_
#define TESSERA_PS_SERVER_SYNC_STEPS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "ps_server/row_table.h"
#include "ps_server/shard.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

// Synchronous training on one parameter server: the gradients workers push
// for a global step, dense shards and table rows alike, summed per shard
// (per row for tables) until the step is complete, then applied once as
// the average over its parts.
//
// Two rules keep every server applying the same updates whatever dies when:
//  - A push is identified by its step and part (SyncPush). A part pushed
//    again (its worker died after reaching this server but before another,
//    and the step ran again) counts once: it is the same gradient, because
//    no server applies the step before every part has reached every server.
//  - A complete step is applied only when the next step shows up: a
//    request tagged with a later step (a pull or a push), an untagged pull
//    (evaluation, export) or a checkpoint save. The coordinator starts
//    step s + 1 only after every part of step s returned, so by then every
//    server holds all of step s, and a re-run of a part of step s reads the
//    values of before step s on every server.
// Pushes of a step already applied, or of a step older than the pending
// one, or beyond the `required` parts (backup workers), are late: dropped
// and counted. A newer step overtaking an incomplete one (its missing parts
// never came: their workers were backups) drops it.
//
// Averaging: each part's gradient is its worker's mean over its batch
// (scaled by the coordinator's StepRequest.sync_scale where the parts'
// batches differ), so the applied sum over parts / required is the mean
// over the global batch.
// A table row no part touched gets no update; every complete step still
// counts as one update of every table shard, as one process training the
// global batch would count it (Adam's step).
//
// Thread safety: all methods may be called concurrently.
class SyncSteps {
 public:
  enum class Outcome {
    kAccumulated,  // kept; the step needs more parts
    kComplete,     // kept; the step has all its parts, applied later
    kDuplicate,    // this part was already counted: dropped
    kLate,         // dropped
  };

  // Adds a part of a dense shard's gradient. InvalidArgument when the size
  // is wrong or the step's pushes disagree on `required`.
  absl::StatusOr<Outcome> AddDense(const SyncPush& sync,
                                   std::shared_ptr<Shard> shard,
                                   absl::Span<const float> grad);
  // Adds a part of a table shard's row gradients (ids.size() rows; repeats
  // allowed, summed). A part with no rows still counts.
  absl::StatusOr<Outcome> AddRows(const SyncPush& sync,
                                  std::shared_ptr<RowTable> table,
                                  absl::Span<const int64_t> ids,
                                  absl::Span<const float> grads);

  // Applies every complete step before `step`, and drops every incomplete
  // one before it; nullopt: applies every complete step, keeps incomplete
  // ones.
  void ApplyBefore(std::optional<int64_t> step);

  // Global-norm clipping across servers (docs/design.md#gradient-
  // clipping): per group (`group_of(shard name)`, "" for a shard in none),
  // the squared L2 norm of this server's part of `step`'s average, each
  // shard's in double over the floats it would apply, added in shard name
  // order. FailedPrecondition naming the shard when a grouped shard holds
  // `step` incomplete or a later step. A shard with no part of `step`
  // adds nothing.
  absl::StatusOr<std::map<std::string, double>> PartialNorms(
      int64_t step,
      absl::FunctionRef<std::string(const std::string& shard)> group_of);
  // Scales each shard's pending `step`, when it is applied, by
  // `scale_of(shard name)` (1: as is).
  void SetClipScales(
      int64_t step,
      absl::FunctionRef<float(const std::string& shard)> scale_of);

  int64_t dropped() const;
  int64_t duplicates() const;
  // Forgets every pending step, as if new: after the shards were restored
  // from a checkpoint, the job's global steps start again from the
  // checkpoint's, and those must not count as late.
  void ResetAll();

  // One shard's pending step (internal; public for the .cc's subclasses).
  class Pending;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Pending>> pending_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_SYNC_STEPS_H_
