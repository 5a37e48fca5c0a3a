#include "common/model/table_placement.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/variable_optimizer.h"

namespace tessera {
namespace {

std::string Bytes(int64_t bytes) {
  if (bytes < (int64_t{1} << 10)) return absl::StrCat(bytes, " B");
  if (bytes < (int64_t{1} << 20)) return absl::StrCat(bytes >> 10, " KiB");
  return absl::StrCat(bytes >> 20, " MiB");
}

}  // namespace

absl::StatusOr<std::vector<TablePlan>> PlaceTables(
    const std::vector<VariableDef>& variables, const JobConfig& job,
    const TrainingMode& mode) {
  std::vector<std::string> tables;
  for (const VariableDef& v : variables) {
    if (v.sparse) tables.push_back(v.name);
  }
  for (const auto& [name, placement] : job.table_placements()) {
    if (std::find(tables.begin(), tables.end(), name) == tables.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table_placements names \"", name, "\", which is no table of the ",
          "model (its tables: ", absl::StrJoin(tables, ", "), ")"));
    }
  }
  const int64_t below = job.replicate_tables_below() == 0
                            ? kReplicateTablesBelow
                            : job.replicate_tables_below();
  std::vector<TablePlan> plans;
  for (const VariableDef& v : variables) {
    if (!v.sparse) continue;
    TablePlan plan;
    plan.name = v.name;
    const bool growing = v.shape.empty() || v.shape[0] == 0;
    if (!growing) {
      plan.bytes = static_cast<int64_t>(sizeof(float));
      for (int64_t d : v.shape) plan.bytes *= d;
    }
    plan.updates = VariableOptimizer(job, v).table_updates();
    if (plan.updates == TABLE_UPDATES_DENSE && growing) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table \"", v.name, "\" grows with the ids it meets (vocab_size ",
          "0), so it takes lazy updates only, but its optimizer has ",
          "table_updates TABLE_UPDATES_DENSE; give it a vocab_size or ",
          "train it with TABLE_UPDATES_LAZY (--table_updates=lazy)"));
    }
    auto it = job.table_placements().find(v.name);
    const TablePlacement asked =
        it == job.table_placements().end() ? TABLE_AUTO : it->second;
    if (asked == TABLE_REPLICATED && growing) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table \"", v.name, "\" grows with the ids it meets (vocab_size ",
          "0), so no worker can hold it whole: it cannot be ",
          "TABLE_REPLICATED; give it a vocab_size or leave it sharded"));
    }
    if (asked == TABLE_REPLICATED && !mode.replicates_dense()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table \"", v.name, "\" is TABLE_REPLICATED, but mode ",
          mode.ToString(), " keeps every variable on the parameter servers ",
          "and all-reduces nothing; use mode hybrid or hybrid:sync"));
    }
    if (growing) {
      plan.reason = "grows with the ids it meets (vocab_size 0)";
    } else if (!mode.replicates_dense()) {
      plan.reason = absl::StrCat("mode ", mode.ToString(),
                                 " keeps the tables on the parameter servers");
    } else if (asked == TABLE_REPLICATED) {
      plan.replicated = true;
      plan.reason = "table_placements: TABLE_REPLICATED";
    } else if (asked == TABLE_SHARDED) {
      plan.reason = "table_placements: TABLE_SHARDED";
    } else if (!mode.uses_parameter_servers()) {
      plan.replicated = true;
      plan.reason = "mode mirrored has no parameter servers";
    } else if (below >= 0 && plan.bytes <= below) {
      plan.replicated = true;
      plan.reason =
          absl::StrCat("at most ", Bytes(below), " (replicate_tables_below)");
    } else {
      plan.reason = below < 0
                        ? "replicate_tables_below is negative: never replicated"
                        : absl::StrCat("larger than ", Bytes(below),
                                       " (replicate_tables_below)");
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

absl::flat_hash_set<std::string> ReplicatedTables(
    const std::vector<TablePlan>& plans) {
  absl::flat_hash_set<std::string> names;
  for (const TablePlan& p : plans) {
    if (p.replicated) names.insert(p.name);
  }
  return names;
}

}  // namespace tessera
