// How each embedding table of a job is stored on the parameter servers
// (JobConfig.table_precisions, table_precision; RowPrecision in
// proto/job.proto), and the job-level checks of precisions and of
// row-wise optimizers, which only tables can use.
#ifndef TESSERA_COMMON_MODEL_TABLE_PRECISION_H_
#define TESSERA_COMMON_MODEL_TABLE_PRECISION_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/model_spec.h"
#include "proto/job.pb.h"

namespace tessera {

// job.table_precisions[table] if named there, else job.table_precision.
RowPrecision TablePrecisionOf(const JobConfig& job, absl::string_view table);

// The precision `table`'s row gradients travel in from the workers:
// job.row_gradient_precisions[table] if named there, else
// job.row_gradient_precision if set, else the table's own precision.
RowPrecision RowGradientPrecisionOf(const JobConfig& job,
                                    absl::string_view table);

// InvalidArgument naming what is wrong when an entry of
// job.table_precisions or job.row_gradient_precisions names no table among
// `variables` (listing them), a precision is not a RowPrecision, or a table
// kept whole on the workers
// (`replicated`, common/model/table_placement.h) is not fp32: replicas
// are all-reduced as fp32 tensors, so only the servers store fp16/bf16.
absl::Status CheckTablePrecisions(
    const JobConfig& job, const std::vector<VariableDef>& variables,
    const absl::flat_hash_set<std::string>& replicated);

// InvalidArgument when a row-wise optimizer (rowwise_adagrad) would train
// a dense variable (job.optimizer with dense variables present), or a
// table kept whole on the workers (whose replica keeps slots shaped as
// the values).
absl::Status CheckRowWiseOptimizers(
    const JobConfig& job, const std::vector<VariableDef>& variables,
    const absl::flat_hash_set<std::string>& replicated);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_TABLE_PRECISION_H_
