// A trained model as one file that loads on one machine with no parameter
// server (tessera_export --format=tessera; tessera_predict reads it as it
// reads a checkpoint). It is a checkpoint file
// (common/checkpoint/checkpoint_file.h), so every byte is checksummed:
//
//   entry "tessera_model":  "job"          uint8  the JobConfig, serialized
//                           "global_step"  int64  [1]
//   entry per variable:     "values"       float  its shape; a growing
//                                                 table [rows held, dim]
//                           "ids"          int64  [rows held], growing
//                                                 tables only, ascending
//
// Only the values: no optimizer slots, so it is the size of the model, and
// it cannot resume training.
#ifndef TESSERA_TOOLS_EXPORT_MODEL_FILE_H_
#define TESSERA_TOOLS_EXPORT_MODEL_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/export/trained_model.h"

namespace tessera {

inline constexpr char kModelFileHeaderEntry[] = "tessera_model";

// Writes `model` to `path` (temporary name, fsync, rename).
absl::Status WriteModelFile(const TrainedModel& model, const std::string& path);

// Reads a file WriteModelFile wrote. DataLoss for a damaged file (the
// checkpoint reader's errors), InvalidArgument for a file that is not a
// model file (saying so when it is an ONNX model), NotFound naming a variable
// the model needs and the file lacks, FailedPrecondition naming one of the
// wrong shape.
absl::StatusOr<TrainedModel> ReadModelFile(const std::string& path);

}  // namespace tessera

#endif  // TESSERA_TOOLS_EXPORT_MODEL_FILE_H_
