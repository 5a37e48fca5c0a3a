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

RowPrecision RowGradientPrecisionOf(const JobConfig& job,
                                    absl::string_view table) {
  auto it = job.row_gradient_precisions().find(std::string(table));
  if (it != job.row_gradient_precisions().end()) return it->second;
  if (job.has_row_gradient_precision()) return job.row_gradient_precision();
  return TablePrecisionOf(job, table);
}

namespace {

// InvalidArgument when `field` (a precision per table) names anything but
// a table of `variables` or holds something but a RowPrecision.
absl::Status CheckPerTable(
    const char* field,
    const google::protobuf::Map<std::string, RowPrecision>& per_table,
    const std::vector<VariableDef>& variables) {
  for (const auto& [table, precision] : per_table) {
    bool is_table = false;
    for (const VariableDef& v : variables) {
      is_table = is_table || (v.sparse && v.name == table);
    }
    if (!is_table) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": \"", table,
                       "\" is not an embedding table of the model (tables: ",
                       TableNames(variables), ")"));
    }
    if (!RowPrecision_IsValid(precision)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": \"", table, "\": ", precision,
                       " is not one of ROW_FP32, ROW_FP16, ROW_BF16"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTablePrecisions(
    const JobConfig& job, const std::vector<VariableDef>& variables,
    const absl::flat_hash_set<std::string>& replicated) {
  if (!RowPrecision_IsValid(job.table_precision())) {
    return absl::InvalidArgumentError(
        absl::StrCat("table_precision: ", job.table_precision(),
                     " is not one of ROW_FP32, ROW_FP16, ROW_BF16"));
  }
  if (job.has_row_gradient_precision() &&
      !RowPrecision_IsValid(job.row_gradient_precision())) {
    return absl::InvalidArgumentError(
        absl::StrCat("row_gradient_precision: ", job.row_gradient_precision(),
                     " is not one of ROW_FP32, ROW_FP16, ROW_BF16"));
  }
  if (absl::Status s =
          CheckPerTable("table_precisions", job.table_precisions(), variables);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPerTable("row_gradient_precisions",
                                     job.row_gradient_precisions(), variables);
      !s.ok()) {
    return s;
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
