#include "coordinator/variable_plan.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/model/model_graph.h"
#include "common/model/model_presets.h"
#include "common/model/table_precision.h"
#include "common/model/variable_optimizer.h"
#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision.h"
#include "partitioners/partitioner_factory.h"

namespace tessera {

absl::StatusOr<VariablePlan> PlanVariables(const JobConfig& job, int num_ps) {
  VariablePlan plan;
  absl::StatusOr<ModelDef> model = JobModel(job);
  if (!model.ok()) return model.status();
  absl::StatusOr<ModelGraph> graph =
      BuildModelGraph(*model, job.schedule().seed());
  if (!graph.ok()) return graph.status();
  plan.variables = std::move(graph->variables);

  PartitionerOptions options;
  const PartitionerConfig& p = job.partitioner();
  options.kind = p.kind().empty() ? "none" : p.kind();
  options.num_shards = p.num_shards();
  if (p.min_shard_bytes() > 0) options.min_shard_bytes = p.min_shard_bytes();
  options.max_shard_bytes = p.max_shard_bytes();
  options.max_shards = p.max_shards();
  absl::StatusOr<std::unique_ptr<Partitioner>> partitioner =
      CreatePartitioner(options);
  if (!partitioner.ok()) return partitioner.status();

  std::vector<VariableShape> shapes;
  for (const VariableDef& v : plan.variables) {
    if (v.sparse && !v.shape.empty() && v.shape[0] == 0) {
      plan.hash_tables.push_back(v.name);
      continue;
    }
    shapes.push_back({v.name, v.shape, sizeof(float)});
  }
  absl::StatusOr<std::vector<ShardInfo>> shards =
      ShardVariables(shapes, **partitioner, num_ps);
  if (!shards.ok()) return shards.status();
  plan.shards = *std::move(shards);
  if (!plan.hash_tables.empty() && num_ps < 1) {
    return absl::InvalidArgumentError(
        "growing embedding tables need at least one parameter server");
  }
  for (const std::string& name : plan.hash_tables) {
    const VariableDef* var = nullptr;
    for (const VariableDef& v : plan.variables) {
      if (v.name == name) var = &v;
    }
    for (int k = 0; k < num_ps; ++k) {
      ShardInfo shard;
      shard.variable = name;
      shard.index = k;
      shard.name = absl::StrCat(name, "/part_", k);
      shard.row_offset = 0;
      shard.rows = 0;
      shard.shape = var->shape;
      shard.bytes = 0;
      shard.ps_task = k;
      plan.shards.push_back(std::move(shard));
    }
  }
  plan.expected_rows_per_shard = job.expected_rows_per_shard();
  for (const VariableDef& v : plan.variables) {
    if (!v.sparse) continue;
    plan.precisions[v.name] = TablePrecisionOf(job, v.name);
    plan.gradient_precisions[v.name] = RowGradientPrecisionOf(job, v.name);
  }
  return plan;
}

RowPrecision VariablePlan::PrecisionOf(const std::string& variable) const {
  auto it = precisions.find(variable);
  return it == precisions.end() ? ROW_FP32 : it->second;
}

bool VariablePlan::IsHashTable(const std::string& variable) const {
  return std::find(hash_tables.begin(), hash_tables.end(), variable) !=
         hash_tables.end();
}

namespace {

void AddShardDef(const VariablePlan& plan, const ShardInfo& shard,
                 CreateShardsRequest* request) {
  const VariableDef* var = nullptr;
  for (const VariableDef& v : plan.variables) {
    if (v.name == shard.variable) var = &v;
  }
  ShardDef* def = request->add_shards();
  def->set_name(shard.name);
  def->set_variable(shard.variable);
  def->set_index(shard.index);
  def->set_row_offset(shard.row_offset);
  for (int64_t d : var->shape) def->mutable_variable_shape()->add_dims(d);
  for (int64_t d : shard.shape) def->mutable_shape()->add_dims(d);
  def->set_dtype(DT_FLOAT);
  *def->mutable_initializer() = var->initializer;
  def->set_precision(plan.PrecisionOf(shard.variable));
  if (plan.IsHashTable(shard.variable)) {
    def->set_hash_table(true);
    def->set_dim(var->shape.size() > 1 ? var->shape[1] : 1);
    int num_shards = 0;
    for (const ShardInfo& s : plan.shards) {
      num_shards += s.variable == shard.variable;
    }
    def->set_num_shards(num_shards);
    def->set_expected_rows(plan.expected_rows_per_shard);
  }
}

}  // namespace

VariablePlan ServedPlan(const VariablePlan& plan, const TrainingMode& mode,
                        const absl::flat_hash_set<std::string>& replicated) {
  VariablePlan served = plan;
  served.shards.clear();
  for (const ShardInfo& shard : plan.shards) {
    if (replicated.contains(shard.variable)) continue;
    const bool table =
        std::any_of(plan.variables.begin(), plan.variables.end(),
                    [&](const VariableDef& v) {
                      return v.name == shard.variable && v.sparse;
                    });
    if (table || !mode.replicates_dense()) served.shards.push_back(shard);
  }
  return served;
}

std::string IdleServersNote(const TrainingMode& mode,
                            const VariablePlan& served, int num_ps) {
  if (num_ps == 0 || !mode.uses_parameter_servers() ||
      !mode.replicates_dense() || !served.shards.empty()) {
    return "";
  }
  return absl::StrCat(
      "mode ", mode.ToString(),
      ": every table is replicated on the workers (replicate_tables_below), "
      "so the ",
      num_ps, " parameter server", num_ps == 1 ? "" : "s",
      " of the cluster will hold nothing and stay idle (start none, or "
      "lower replicate_tables_below to shard the larger tables)");
}

std::vector<CreateShardsRequest> ShardRequests(const VariablePlan& plan,
                                               const OptimizerConfig& optimizer,
                                               int num_ps) {
  std::vector<CreateShardsRequest> requests(num_ps);
  for (CreateShardsRequest& r : requests) *r.mutable_optimizer() = optimizer;
  for (const ShardInfo& shard : plan.shards) {
    AddShardDef(plan, shard, &requests[shard.ps_task]);
  }
  return requests;
}

std::vector<std::vector<CreateShardsRequest>> ShardRequestsByKind(
    const VariablePlan& plan, const JobConfig& job, int num_ps) {
  // One request per parameter server and optimizer: the tables', the
  // dense variables', and each other optimizer's (a table's own, an update
  // rule), in the order they first appear.
  const OptimizerConfig& embedding_optimizer = job.has_embedding_optimizer()
                                                   ? job.embedding_optimizer()
                                                   : job.optimizer();
  std::vector<OptimizerConfig> kinds = {embedding_optimizer, job.optimizer()};
  auto kind_of = [&](const std::string& variable) -> int {
    for (const VariableDef& v : plan.variables) {
      if (v.name != variable) continue;
      const bool own = v.update_rule.has_value() ||
                       (v.sparse && job.table_optimizers().contains(v.name));
      if (!own) return v.sparse ? 0 : 1;
      const OptimizerConfig& optimizer = VariableOptimizer(job, v);
      const std::string bytes = optimizer.SerializeAsString();
      for (size_t k = 2; k < kinds.size(); ++k) {
        if (kinds[k].SerializeAsString() == bytes) return static_cast<int>(k);
      }
      kinds.push_back(optimizer);
      return static_cast<int>(kinds.size()) - 1;
    }
    return 1;
  };
  std::vector<std::vector<CreateShardsRequest>> by_kind;
  for (const ShardInfo& shard : plan.shards) {
    const int kind = kind_of(shard.variable);
    if (by_kind.size() < kinds.size()) {
      by_kind.resize(kinds.size(), std::vector<CreateShardsRequest>(num_ps));
    }
    CreateShardsRequest& request = by_kind[kind][shard.ps_task];
    if (request.shards_size() == 0) {
      *request.mutable_optimizer() = kinds[kind];
    }
    AddShardDef(plan, shard, &request);
  }
  std::vector<std::vector<CreateShardsRequest>> out(num_ps);
  for (auto& requests : by_kind) {
    for (int k = 0; k < num_ps; ++k) {
      if (requests[k].shards_size() > 0) {
        out[k].push_back(std::move(requests[k]));
      }
    }
  }
  return out;
}

std::vector<TableMemory> TableMemoryOf(const VariablePlan& plan,
                                       const JobConfig& job, int num_ps) {
  std::vector<TableMemory> out;
  for (const VariableDef& v : plan.variables) {
    if (!v.sparse) continue;
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
        CreateOptimizer(VariableOptimizer(job, v));
    if (!optimizer.ok()) continue;
    const bool growing = plan.IsHashTable(v.name);
    const int64_t dim = v.shape.size() > 1 ? v.shape.back() : 1;
    const RowPrecision precision = plan.PrecisionOf(v.name);
    const TableRowBytes row = RowBytesOf(precision, dim, **optimizer, growing);
    TableMemory t;
    t.set_name(v.name);
    t.set_precision(RowPrecisionName(precision));
    t.set_optimizer((*optimizer)->name());
    for (int k = 0; k < (*optimizer)->num_slots(); ++k) {
      t.set_slot_floats_per_row(t.slot_floats_per_row() +
                                (*optimizer)->slot_row_elements(k, dim));
    }
    t.set_bytes_per_row(row.total());
    t.set_growing(growing);
    std::vector<int64_t> per_ps(std::max(num_ps, 0), 0);
    for (const ShardInfo& s : plan.shards) {
      if (s.variable != v.name || s.ps_task < 0 || s.ps_task >= num_ps) {
        continue;
      }
      const int64_t rows = growing ? plan.expected_rows_per_shard : s.rows;
      per_ps[s.ps_task] += rows * row.total();
    }
    for (int64_t bytes : per_ps) t.add_bytes_per_server(bytes);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<VariablePlacement> Placements(const VariablePlan& plan) {
  std::vector<VariablePlacement> out;
  for (const VariableDef& v : plan.variables) {
    VariablePlacement placement;
    placement.set_name(v.name);
    for (int64_t d : v.shape) placement.mutable_shape()->add_dims(d);
    placement.set_hash_table(plan.IsHashTable(v.name));
    placement.set_precision(plan.PrecisionOf(v.name));
    auto gradient = plan.gradient_precisions.find(v.name);
    if (gradient != plan.gradient_precisions.end()) {
      placement.set_gradient_precision(gradient->second);
    }
    for (const ShardInfo& shard : plan.shards) {
      if (shard.variable != v.name) continue;
      ShardPlacement* p = placement.add_shards();
      p->set_name(shard.name);
      p->set_row_offset(shard.row_offset);
      p->set_rows(shard.rows);
      p->set_ps_task(shard.ps_task);
    }
    out.push_back(std::move(placement));
  }
  return out;
}

}  // namespace tessera
