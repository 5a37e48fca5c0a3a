#include "common/model/variable_optimizer.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera {

const OptimizerConfig& VariableOptimizer(const JobConfig& job,
                                         const VariableDef& variable) {
  if (variable.update_rule.has_value()) return *variable.update_rule;
  if (!variable.sparse) return job.optimizer();
  auto it = job.table_optimizers().find(variable.name);
  if (it != job.table_optimizers().end()) return it->second;
  return job.has_embedding_optimizer() ? job.embedding_optimizer()
                                       : job.optimizer();
}

absl::Status CheckTableOptimizers(const JobConfig& job,
                                  const std::vector<VariableDef>& variables) {
  std::vector<std::string> tables;
  for (const VariableDef& v : variables) {
    if (v.sparse) tables.push_back(v.name);
  }
  // Sorted, so that the first bad entry is the same on every run.
  std::vector<std::string> names;
  for (const auto& [name, optimizer] : job.table_optimizers()) {
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (std::find(tables.begin(), tables.end(), name) == tables.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table_optimizers: \"", name, "\" is not a table of the model (",
          tables.empty()
              ? "it has none"
              : absl::StrCat("tables: ", absl::StrJoin(tables, ", ")),
          ")"));
    }
    if (job.table_optimizers().at(name).has_moving_average()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table_optimizers: \"", name,
          "\": moving_average is not an optimizer a job can choose (it "
          "updates BatchNorm's moving statistics)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
