// Where each embedding table of a job lives: sharded on the parameter
// servers, or replicated whole on every worker and all-reduced with the
// dense variables (TorchRec's data-parallel tables). The coordinator
// decides once, prints the decision in --dry_run, and sends each worker
// the replicated tables (WorkerConfig.replicated_tables).

#ifndef TESSERA_COMMON_MODEL_TABLE_PLACEMENT_H_
#define TESSERA_COMMON_MODEL_TABLE_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "common/training_mode.h"
#include "proto/job.pb.h"

namespace tessera {

// TABLE_AUTO's threshold in mode hybrid. A replicated table costs every
// worker an all-reduce of its whole gradient each step (the ring sends
// about twice the table's bytes); a sharded one, a pull and a push of the
// rows the batch touches. At 64 KiB (1,024 rows of dim 16) a table is
// about as large as the rows one batch of 256 to 512 examples pulls and
// pushes, so below it the all-reduce is the cheaper of the two and saves
// two round trips to the servers per step.
inline constexpr int64_t kReplicateTablesBelow = int64_t{64} << 10;

struct TablePlan {
  std::string name;
  bool replicated = false;
  int64_t bytes = 0;   // the whole table (0: a growing table)
  std::string reason;  // why here, for --dry_run
  // Its optimizer's table_updates (VariableOptimizer), which both
  // placements follow.
  TableUpdates updates = TABLE_UPDATES_LAZY;
};

// One plan per table of `variables`, in order:
//  - modes async, ssp and sync keep every table on the servers;
//  - mirrored (no servers) replicates every fixed-vocabulary table;
//  - hybrid follows job.table_placements, and TABLE_AUTO replicates a
//    fixed table of at most job.replicate_tables_below bytes.
// A growing table (vocab_size 0) is always sharded. InvalidArgument,
// naming the table, for a table_placements entry that names no table,
// TABLE_REPLICATED of a growing table, TABLE_REPLICATED in a mode
// without replicas (async, ssp, sync), or TABLE_UPDATES_DENSE for a
// growing table (it has no whole to step).
absl::StatusOr<std::vector<TablePlan>> PlaceTables(
    const std::vector<VariableDef>& variables, const JobConfig& job,
    const TrainingMode& mode);

// The names of the replicated tables of `plans`.
absl::flat_hash_set<std::string> ReplicatedTables(
    const std::vector<TablePlan>& plans);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_TABLE_PLACEMENT_H_
