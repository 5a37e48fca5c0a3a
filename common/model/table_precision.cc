#include "common/model/table_precision.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/variable_optimizer.h"

namespace tessera {
namespace {

std::string PrecisionName(RowPrecision precision) {
  switch (precision) {
    case ROW_FP16:
      return "fp16";
    case ROW_BF16:
      return "bf16";
    default:
      return "fp32";
  }
}

std::string TableNames(const std::vector<VariableDef>& variables) {
  std::vector<std::string> names;
  for (const VariableDef& v : variables) {
    if (v.sparse) names.push_back(v.name);
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

RowPrecision TablePrecisionOf(const JobConfig& job, absl::string_view table) {
  auto it = job.table_precisions().find(std::string(table));
  return it != job.table_precisions().end() ? it->second
                                            : job.table_precision();
}

absl::Status CheckTablePrecisions(
    const JobConfig& job, const std::vector<VariableDef>& variables,
    const absl::flat_hash_set<std::string>& replicated) {
  if (!RowPrecision_IsValid(job.table_precision())) {
    return absl::InvalidArgumentError(
        absl::StrCat("table_precision: ", job.table_precision(),
                     " is not one of ROW_FP32, ROW_FP16, ROW_BF16"));
  }
  for (const auto& [table, precision] : job.table_precisions()) {
    bool is_table = false;
    for (const VariableDef& v : variables) {
      is_table = is_table || (v.sparse && v.name == table);
    }
    if (!is_table) {
      return absl::InvalidArgumentError(
          absl::StrCat("table_precisions: \"", table,
                       "\" is not an embedding table of the model (tables: ",
                       TableNames(variables), ")"));
    }
    if (!RowPrecision_IsValid(precision)) {
      return absl::InvalidArgumentError(
          absl::StrCat("table_precisions: \"", table, "\": ", precision,
                       " is not one of ROW_FP32, ROW_FP16, ROW_BF16"));
    }
  }
  for (const VariableDef& v : variables) {
    if (!v.sparse || !replicated.contains(v.name)) continue;
    const RowPrecision p = TablePrecisionOf(job, v.name);
    if (p != ROW_FP32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table \"", v.name,
          "\" is replicated on the workers, which keep "
          "tables in fp32 only, but its precision is ",
          PrecisionName(p),
          " (shard it with table_placements TABLE_SHARDED, or leave it "
          "fp32)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRowWiseOptimizers(
    const JobConfig& job, const std::vector<VariableDef>& variables,
    const absl::flat_hash_set<std::string>& replicated) {
  for (const VariableDef& v : variables) {
    const OptimizerConfig& optimizer = VariableOptimizer(job, v);
    if (!optimizer.has_rowwise_adagrad()) continue;
    if (!v.sparse) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer rowwise_adagrad trains embedding tables only, but it "
          "would train dense variable \"",
          v.name,
          "\": give the dense layers another optimizer (--optimizer) and the "
          "tables rowwise_adagrad (--embedding_optimizer or "
          "table_optimizers)"));
    }
    if (replicated.contains(v.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("table \"", v.name,
                       "\" is replicated on the workers, which do not support "
                       "rowwise_adagrad yet (shard it with table_placements "
                       "TABLE_SHARDED, or give it an element-wise optimizer)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
