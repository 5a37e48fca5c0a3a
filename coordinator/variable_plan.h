#ifndef TESSERA_COORDINATOR_VARIABLE_PLAN_H_
#define TESSERA_COORDINATOR_VARIABLE_PLAN_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "common/training_mode.h"
#include "partitioners/variable_sharding.h"
#include "proto/coordinator_service.pb.h"
#include "proto/job.pb.h"
#include "proto/ps_service.pb.h"
#include "proto/worker_service.pb.h"

namespace tessera {

// Where every variable of a job goes: the model's variables, split by the
// job's partitioner and placed on parameter servers.
//
// Embedding tables (sparse variables) of a fixed vocabulary are split by the
// partitioner like any variable (div layout, partitioners/shard_layout.h).
// A growing table (vocab_size 0, shape [0, dim]) gets one hash shard per
// parameter server instead: shard k, on ps k, holds the ids
// HashShardOf(id, num_ps) routes to k.
struct VariablePlan {
  std::vector<VariableDef> variables;
  std::vector<ShardInfo> shards;  // hash shards have rows 0, shape [0, dim]
  // Names of the growing tables, whose shards are hash shards.
  std::vector<std::string> hash_tables;
  int64_t expected_rows_per_shard = 0;  // the hash shards' capacity hint
  // How each table's rows are stored (common/model/table_precision.h);
  // tables not here, and dense variables, are fp32.
  absl::flat_hash_map<std::string, RowPrecision> precisions;
  // What each table's row gradients travel in (RowGradientPrecisionOf);
  // tables not here push fp32.
  absl::flat_hash_map<std::string, RowPrecision> gradient_precisions;

  bool IsHashTable(const std::string& variable) const;
  RowPrecision PrecisionOf(const std::string& variable) const;
};

absl::StatusOr<VariablePlan> PlanVariables(const JobConfig& job, int num_ps);

// The shards of `plan` the parameter servers hold in `mode`: in mirrored
// and hybrid modes the dense variables live on the workers, and so do the
// `replicated` tables (common/model/table_placement.h).
VariablePlan ServedPlan(const VariablePlan& plan, const TrainingMode& mode,
                        const absl::flat_hash_set<std::string>& replicated);

// A hybrid job whose every table is replicated on the workers gives its
// `num_ps` parameter servers nothing to hold (`served`, ServedPlan's, has
// no shard): the note saying so, which they would otherwise not; "" in
// any other case (mirrored mode's own note is ModeForCluster's).
std::string IdleServersNote(const TrainingMode& mode,
                            const VariablePlan& served, int num_ps);

// One CreateShards request per parameter server (index = ps task).
std::vector<CreateShardsRequest> ShardRequests(const VariablePlan& plan,
                                               const OptimizerConfig& optimizer,
                                               int num_ps);

// As ShardRequests, with each variable's shards created with the optimizer
// the job gives it (common/model/variable_optimizer.h): a parameter server
// gives every shard of one request the request's optimizer, so each ps gets
// one request per optimizer (tables, dense, then per-table optimizers and
// update rules as they first appear), in the order to send them.
std::vector<std::vector<CreateShardsRequest>> ShardRequestsByKind(
    const VariablePlan& plan, const JobConfig& job, int num_ps);

// What each embedding table of `plan` costs `num_ps` parameter servers:
// its precision, its optimizer (job's VariableOptimizer), the slot floats
// and bytes per row (RowBytesOf, common/optimizer/row_precision.h) and
// the bytes on each server (a growing table at expected_rows_per_shard
// rows). Tables whose optimizer the job cannot make are left out (the
// job's validation names them).
std::vector<TableMemory> TableMemoryOf(const VariablePlan& plan,
                                       const JobConfig& job, int num_ps);

// What a worker needs to route its pulls and pushes.
std::vector<VariablePlacement> Placements(const VariablePlan& plan);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_VARIABLE_PLAN_H_
