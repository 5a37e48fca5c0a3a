#include "coordinator/dry_run.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/data_format.h"
#include "common/model/model_graph.h"
#include "common/model/model_summary.h"
#include "common/model/variable_optimizer.h"
#include "common/optimizer/optimizer.h"
#include "data/data_check.h"
#include "partitioners/variable_sharding.h"

namespace tessera {
namespace {

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", bytes / double{1 << 30});
}

std::string Bytes(int64_t bytes) {
  return bytes < (int64_t{1} << 20)
             ? absl::StrFormat("%.1f KiB", bytes / double{1 << 10})
             : absl::StrFormat("%.2f MiB", bytes / double{1 << 20});
}

}  // namespace

int64_t MachineMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t{pages} * page : 0;
}

namespace {

void PrintTablePlacements(const std::vector<TablePlan>& tables, FILE* out) {
  if (tables.empty()) return;
  size_t width = 5;
  for (const TablePlan& t : tables) {
    width = std::max(width, t.name.size());
  }
  std::fprintf(out, "%-*s  %-10s  %10s  %-7s  why\n", static_cast<int>(width),
               "table", "placement", "bytes", "updates");
  for (const TablePlan& t : tables) {
    std::fprintf(
        out, "%-*s  %-10s  %10s  %-7s  %s\n", static_cast<int>(width),
        t.name.c_str(), t.replicated ? "replicated" : "sharded",
        t.bytes > 0 ? absl::StrFormat("%d", t.bytes).c_str() : "growing",
        t.updates == TABLE_UPDATES_DENSE ? "dense" : "lazy", t.reason.c_str());
  }
  std::fprintf(out,
               "updates: lazy steps only the rows a batch touched (the "
               "default), dense every row (Keras); the same on the "
               "servers and in the workers' replicas (table_updates)\n");
}

// The variables a replica holds: dense ones and replicated tables.
void PrintReplicated(const VariablePlan& plan,
                     const std::vector<TablePlan>& table_plans, FILE* out) {
  int64_t dense = 0, bytes = 0;
  for (const VariableDef& v : plan.variables) {
    if (v.sparse) continue;
    ++dense;
    int64_t n = 1;
    for (int64_t d : v.shape) n *= d;
    bytes += n * static_cast<int64_t>(sizeof(float));
  }
  // The replicated tables are on every worker too: a replica is both.
  int64_t tables = 0, table_bytes = 0;
  for (const TablePlan& t : table_plans) {
    if (!t.replicated) continue;
    ++tables;
    table_bytes += t.bytes;
  }
  std::fprintf(out,
               "dense variables: %lld (%s) and replicated tables: %lld "
               "(%s) replicated on every worker (%s each) and "
               "all-reduced each global step; the parameter servers "
               "hold:\n",
               static_cast<long long>(dense), Bytes(bytes).c_str(),
               static_cast<long long>(tables), Bytes(table_bytes).c_str(),
               Bytes(bytes + table_bytes).c_str());
}

void PrintServerMemory(const JobConfig& job, const ClusterSpec& cluster,
                       const VariablePlan& plan, int64_t memory_bytes,
                       FILE* out) {
  const int num_ps = cluster.num_tasks("ps");
  // What each server holds: a dense shard's values with one of each of
  // its optimizer's slots (Adam: two), and each table's rows in their
  // precision with their slots (rowwise_adagrad: one float a row).
  const int64_t memory = memory_bytes > 0 ? memory_bytes : MachineMemoryBytes();
  std::vector<int64_t> held(num_ps, 0);
  for (const VariableDef& v : plan.variables) {
    if (v.sparse) continue;
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
        CreateOptimizer(VariableOptimizer(job, v));
    const int slots = optimizer.ok() ? (*optimizer)->num_slots() : 0;
    for (const ShardInfo& s : plan.shards) {
      if (s.variable == v.name && s.ps_task >= 0 && s.ps_task < num_ps) {
        held[s.ps_task] += s.bytes * (1 + slots);
      }
    }
  }
  std::string table_lines;
  for (const TableMemory& t : TableMemoryOf(plan, job, num_ps)) {
    std::vector<std::string> servers;
    for (int p = 0; p < t.bytes_per_server_size(); ++p) {
      held[p] += t.bytes_per_server(p);
      if (t.bytes_per_server(p) > 0) {
        servers.push_back(Bytes(t.bytes_per_server(p)));
      }
    }
    absl::StrAppendFormat(
        &table_lines,
        "  %s  %s  %s  %lld slot float%s/row  %lld B/row  per ps: %s\n",
        t.name(), t.precision(), t.optimizer(),
        static_cast<long long>(t.slot_floats_per_row()),
        t.slot_floats_per_row() == 1 ? "" : "s",
        static_cast<long long>(t.bytes_per_row()),
        t.growing() && plan.expected_rows_per_shard == 0
            ? "growing (set expected_rows_per_shard to count it)"
            : absl::StrJoin(servers, ", "));
  }
  if (!table_lines.empty()) {
    std::fprintf(out, "table memory on the servers:\n%s", table_lines.c_str());
  }
  for (int t = 0; t < num_ps; ++t) {
    if (memory > 0 && held[t] > memory) {
      std::fprintf(out,
                   "warning: ps %d (%s) would hold %s of values and "
                   "optimizer slots, more than this machine's %s of "
                   "memory\n",
                   t, cluster.tasks("ps")[t].c_str(), GiB(held[t]).c_str(),
                   GiB(memory).c_str());
    }
  }
}

}  // namespace

absl::Status DryRun(const JobConfig& job, const ClusterSpec& cluster,
                    const VariablePlan& plan, const DryRunOptions& options,
                    FILE* out) {
  absl::StatusOr<ModelGraph> graph =
      BuildModelGraph(job.model_def(), job.schedule().seed());
  if (!graph.ok()) return graph.status();
  std::fprintf(out, "%s\n", FormatModelSummary(*graph).c_str());
  if (!options.mode_note.empty()) {
    std::fprintf(out, "note: %s\n", options.mode_note.c_str());
  }
  PrintTablePlacements(options.tables, out);
  const int num_ps = cluster.num_tasks("ps");
  if (num_ps == 0) {
    std::fprintf(out,
                 "no parameter servers: mirrored training, every worker "
                 "holds all %zu variables\n",
                 plan.variables.size());
  } else {
    if (options.dense_on_workers) PrintReplicated(plan, options.tables, out);
    std::fprintf(out, "%s",
                 FormatShardTable(plan.shards, cluster.tasks("ps")).c_str());
    PrintServerMemory(job, cluster, plan, options.memory_bytes, out);
  }
  if (!options.check_data) {
    std::fprintf(out, "data: not checked (--check_data=false)\n");
    return absl::OkStatus();
  }
  if (absl::Status s = CheckDataAgainstModel(job.data(), job.model_def());
      !s.ok()) {
    return s;
  }
  std::fprintf(out,
               "data: the first training and test examples fit the model%s\n",
               DataFormatNamed(job.data().format()) == DataFormat::kIdx
                   ? "; every label is in range"
                   : "");
  return absl::OkStatus();
}

}  // namespace tessera
