// A Keras model as a Tessera job: its layers as a ModelDef with Keras'
// names, its compile config as the job's loss, metrics and optimizer, and
// its saved weights as the initial values of the job's variables.
#ifndef TESSERA_TOOLS_KERAS_KERAS_IMPORT_H_
#define TESSERA_TOOLS_KERAS_KERAS_IMPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "tools/keras/keras_archive.h"

namespace tessera {

struct KerasImportOptions {
  // A Keras loss name ("sparse_categorical_crossentropy") for a model
  // without a compile config (to_json() holds none); empty: the one the
  // output layer suggests (softmax: sparse categorical cross-entropy,
  // sigmoid of one unit: binary cross-entropy, else mean squared error).
  std::string loss;
};

struct KerasImport {
  // model_def, optimizer and schedule (Keras' fit defaults); no data.
  JobConfig job;
  // What the user should know: what was assumed or left out.
  std::vector<std::string> notes;
  // Each variable's saved value, by Tessera variable name, in the model
  // graph's order (a .keras file only).
  std::vector<std::pair<std::string, KerasArray>> values;
};

// Converts `file`. Refuses (InvalidArgument naming the layer, its class
// and why) any layer, option, loss or optimizer Tessera cannot train as
// Keras would; nothing is half-converted.
absl::StatusOr<KerasImport> ImportKerasModel(const KerasModelFile& file,
                                             const KerasImportOptions& options);

}  // namespace tessera

#endif  // TESSERA_TOOLS_KERAS_KERAS_IMPORT_H_
