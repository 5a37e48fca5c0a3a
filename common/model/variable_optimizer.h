// Which optimizer trains each variable of a job. Tables and dense layers
// may train differently (DLRM-DCNv2's reference: Adagrad for the tables,
// Adam for the rest), and each table may choose its own, as HugeCTR and
// TorchRec allow (a wide part with one rule, deep tables with another).

#ifndef TESSERA_COMMON_MODEL_VARIABLE_OPTIMIZER_H_
#define TESSERA_COMMON_MODEL_VARIABLE_OPTIMIZER_H_

#include <vector>

#include "absl/status/status.h"
#include "common/model_spec.h"
#include "proto/job.pb.h"

namespace tessera {

// A variable's update rule if it has one (moving statistics); for a table,
// its entry in job.table_optimizers, else job.embedding_optimizer, else
// job.optimizer; for any other variable, job.optimizer.
const OptimizerConfig& VariableOptimizer(const JobConfig& job,
                                         const VariableDef& variable);

// InvalidArgument naming the entry of job.table_optimizers that names no
// table among `variables` (listing the tables), or whose optimizer is
// moving_average (a rule for statistics, not an optimizer).
absl::Status CheckTableOptimizers(const JobConfig& job,
                                  const std::vector<VariableDef>& variables);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_VARIABLE_OPTIMIZER_H_
