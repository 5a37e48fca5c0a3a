#ifndef TESSERA_COMMON_TRAINING_MODE_H_
#define TESSERA_COMMON_TRAINING_MODE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// How workers' updates meet the parameters (--mode).
//   async       every push is applied as it arrives (TF's
//               ParameterServerStrategy);
//   sync        each step is one global batch split over the workers; a
//               shard applies the average of the step's gradients once;
//   ssp:S       bounded staleness: a worker starts its step c only when
//               the slowest worker has finished c - S steps;
//   mirrored    no parameter servers; every worker holds every variable
//               and gradients are all-reduced (TF's MirroredStrategy).
//   hybrid      dense variables as in mirrored (replicated on the workers,
//               all-reduced every global step), embedding tables sharded
//               on the parameter servers, their rows pushed
//               asynchronously (Persia's and Monolith's split);
//   hybrid:ssp:S
//               the same, a worker's row pushes left in flight for up to
//               S more steps while it trains on (Persia's bounded
//               staleness): its pulls may miss its last S steps' rows;
//   hybrid:sync the same, the rows aggregated per global step as in sync,
//               so a step equals one process training the global batch.
struct TrainingMode {
  enum class Kind { kAsync, kSync, kSsp, kMirrored, kHybrid };
  Kind kind = Kind::kAsync;
  // ssp:S, and hybrid:ssp:S (the row pushes a worker leaves in flight).
  int64_t staleness = 0;
  bool sync_rows = false;  // hybrid:sync
  bool ssp_rows = false;   // hybrid:ssp:S

  bool uses_parameter_servers() const { return kind != Kind::kMirrored; }
  // Dense variables live on every worker and meet in an all-reduce.
  bool replicates_dense() const {
    return kind == Kind::kMirrored || kind == Kind::kHybrid;
  }
  // Pushes to the parameter servers carry their global step, and a
  // server applies a step's sum once (ps_server/sync_steps.h).
  bool aggregates_steps() const {
    return kind == Kind::kSync || (kind == Kind::kHybrid && sync_rows);
  }
  // Steps of one global step run together and wait for each other.
  bool lockstep() const { return kind == Kind::kSync || replicates_dense(); }
  std::string ToString() const;
};

// Parses "async", "sync", "ssp:S" (S >= 0), "mirrored", "hybrid",
// "hybrid:ssp:S" and "hybrid:sync"; errors name the text and the accepted
// forms.
absl::StatusOr<TrainingMode> ParseTrainingMode(absl::string_view text);

// The mode a job's `mode` text means on a cluster of `num_ps` parameter
// servers. As in TF, a cluster without parameter servers trains mirrored:
// "async" (the default) becomes mirrored there, and *note says so, since
// a user who asked for async must not get another mode silently. On a
// cluster with parameter servers, "mirrored" leaves them idle: *note says
// that too. InvalidArgument for a mode that needs servers when there are
// none (sync, ssp:S), naming what to do instead.
absl::StatusOr<TrainingMode> ModeForCluster(absl::string_view text, int num_ps,
                                            std::string* note);

}  // namespace tessera

#endif  // TESSERA_COMMON_TRAINING_MODE_H_
