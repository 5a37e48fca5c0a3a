#ifndef TESSERA_PS_SERVER_RESTORE_VARIABLE_RESTORE_H_
#define TESSERA_PS_SERVER_RESTORE_VARIABLE_RESTORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "proto/checkpoint.pb.h"
#include "proto/job.pb.h"

namespace tessera {

// A variable to read from a checkpoint, with the optimizer it was trained
// with: a checkpoint holds the optimizer's slots beside the values, and
// they must match.
struct VariableToRestore {
  VariableDef variable;
  OptimizerConfig optimizer;
};

// One variable read whole out of a checkpoint, whatever number of
// parameter servers saved it.
struct RestoredVariable {
  std::string name;
  std::vector<int64_t> shape;  // a growing table's: [rows saved, dim]
  std::vector<float> values;   // row-major
  // A growing (hashed) table only: the id of each row, ascending, so the
  // same checkpoint always reads the same way.
  std::vector<int64_t> ids;
};

// The public way to read trained variables out of a checkpoint without a
// cluster (the exporter, batch prediction, the evaluator): each variable
// is restored onto one shard holding all of it, as one parameter server
// would restore it (ps_server/shard_checkpoint.h: the same checks and
// errors), and copied out. Returned in the order of `variables`.
absl::StatusOr<std::vector<RestoredVariable>> RestoreVariables(
    const CheckpointManifest& manifest, const std::string& directory,
    absl::Span<const VariableToRestore> variables);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_RESTORE_VARIABLE_RESTORE_H_
