// The layer graph of a Keras model's config, read the same way from every
// format Tessera accepts: Sequential and Functional models, saved by
// Keras 3 (config.json, to_json()) or Keras 2 / tf_keras (to_json()).
// Only connections are read here; keras_import.h gives layers meaning.
#ifndef TESSERA_TOOLS_KERAS_KERAS_GRAPH_H_
#define TESSERA_TOOLS_KERAS_KERAS_GRAPH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera {

struct KerasNode {
  std::string name;
  std::string class_name;
  nlohmann::json config;
  // The layers whose outputs it reads, in call order (none for an
  // InputLayer).
  std::vector<std::string> inputs;
};

struct KerasGraph {
  std::string name;                  // the model's
  bool sequential = false;           // else Functional
  int keras_major = 3;               // 2: saved by Keras 2 / tf_keras
  std::vector<KerasNode> layers;     // config order, InputLayers included
  std::vector<std::string> inputs;   // InputLayer names, in model order
  std::vector<std::string> outputs;  // layer names, in model order

  const KerasNode* Find(const std::string& name) const;
};

// Reads the model config `model` ({"class_name": "Sequential" or
// "Functional", "config": ...}). InvalidArgument for a subclassed or
// nested model, a layer called more than once (shared), a layer reading a
// layer that does not exist, or a Sequential without an input shape.
absl::StatusOr<KerasGraph> ParseKerasGraph(const nlohmann::json& model);

// The order of model.layers once Keras has rebuilt `graph` from its config,
// which decides the names of the weight file's groups: a Sequential's
// layers in order without its InputLayer; a Functional's as Keras'
// map_graph sorts them (by depth from the outputs, then by first visit).
std::vector<std::string> KerasLayerOrder(const KerasGraph& graph);

// Keras' naming.to_snake_case ("BatchNormalization" -> "batch_normalization",
// "ReLU" -> "re_lu", "Conv2D" -> "conv2d").
std::string KerasSnakeCase(const std::string& class_name);

// The weight file's group of each layer of `order` ("layers/dense_1"), as
// saving_lib names them: the class in snake case, numbered from the second
// of a class on.
std::vector<std::string> KerasWeightGroups(
    const KerasGraph& graph, const std::vector<std::string>& order);

}  // namespace tessera

#endif  // TESSERA_TOOLS_KERAS_KERAS_GRAPH_H_
