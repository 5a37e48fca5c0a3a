// The embedding tables of a trained model as text files, for a model
// exported with --embeddings=pooled_inputs: whoever serves it looks ids up
// in these (a feature store, a sharded key-value service) and feeds the
// pooled embeddings to the ONNX model. One file per table,
// <dir>/<table>.tsv, one row a line:
//
//   <id> TAB <v0> <v1> ... <v(dim-1)>
//
// A growing (hashed) table lists the ids it holds, ascending; an id it does
// not hold reads zeros. A fixed-vocabulary table lists rows 0 ..
// vocab_size - 1; id x reads row x mod vocab_size (non-negative). Values
// print so that reading them back gives the same float.
#ifndef TESSERA_TOOLS_EXPORT_TABLE_FILES_H_
#define TESSERA_TOOLS_EXPORT_TABLE_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "tools/export/trained_model.h"

namespace tessera {

// Writes every table of `model` into `dir` (created if missing), each
// under a temporary name then renamed. Errors name the file.
absl::Status WriteTableFiles(const TrainedModel& model, const std::string& dir);

}  // namespace tessera

#endif  // TESSERA_TOOLS_EXPORT_TABLE_FILES_H_
