// A Keras model as files: the `.keras` archive of Keras 3 (a zip of
// config.json, metadata.json and model.weights.h5) or the JSON that
// model.to_json() writes (Keras 3 or Keras 2 / tf_keras; no weights).
// The zip goes through libzip and the weights through the HDF5 C library;
// nothing here knows what a layer means (keras_import.h, keras_export.h).
#ifndef TESSERA_TOOLS_KERAS_KERAS_ARCHIVE_H_
#define TESSERA_TOOLS_KERAS_KERAS_ARCHIVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera {

// One saved variable of a layer (vars/0, vars/1, ... in Keras' order).
struct KerasArray {
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major
};

// The variables of one layer, as model.weights.h5 holds them under
// `group` ("layers/dense_1"); `layer` is the layer's own name (the vars
// group's "name" attribute).
struct KerasLayerWeights {
  std::string group;
  std::string layer;
  std::vector<KerasArray> vars;
};

struct KerasModelFile {
  nlohmann::json config;    // config.json, or the whole to_json() text
  nlohmann::json metadata;  // metadata.json; null for a JSON file
  bool has_weights = false;
  std::vector<KerasLayerWeights> weights;  // in the file's group order
};

// Reads `path`: a zip archive (by its first bytes) as a `.keras` file,
// anything else as JSON. InvalidArgument names the file and what is
// wrong with it (not a zip or JSON, a missing member, a weight that is not
// floats); NotFound when the file does not exist.
absl::StatusOr<KerasModelFile> ReadKerasModelFile(const std::string& path);

// Writes a `.keras` archive (temporary name, then rename): config.json,
// metadata.json and model.weights.h5 with each layer's variables under
// "<group>/vars/<i>" as float32, the vars group carrying the layer's name,
// as Keras 3's saving_lib lays them out. `model_name` names the root vars
// group; `optimizer_name` the (empty) optimizer group, whose state is not
// exported.
absl::Status WriteKerasArchive(const std::string& path,
                               const nlohmann::json& config,
                               const nlohmann::json& metadata,
                               const std::vector<KerasLayerWeights>& weights,
                               const std::string& model_name,
                               const std::string& optimizer_name);

}  // namespace tessera

#endif  // TESSERA_TOOLS_KERAS_KERAS_ARCHIVE_H_
