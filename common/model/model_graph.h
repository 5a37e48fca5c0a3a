#ifndef TESSERA_COMMON_MODEL_MODEL_GRAPH_H_
#define TESSERA_COMMON_MODEL_MODEL_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/model/layer_kinds.h"
#include "common/model_spec.h"
#include "proto/model.pb.h"

namespace tessera {

// A model description checked and understood: every default written out,
// the layers in an order where each runs after the layers it reads from,
// every tensor's shape, and the variables the parameter servers hold. The
// coordinator and the worker both build it from the same ModelDef, so they
// agree on every name and shape.
struct ModelGraph {
  ModelDef resolved;       // defaults written out, layers as given
  std::vector<int> order;  // indices into resolved.layers()
  absl::flat_hash_map<std::string, TensorFacts> tensors;
  // One per variable name (a table shared by several layers once), in
  // layer order; initializers carry their seeds and Glorot fans.
  std::vector<VariableDef> variables;
};

// Checks `model` and derives its graph, with initial values drawn from
// `seed`. InvalidArgument names what is wrong: a duplicate or empty name,
// an unknown tensor (and the layer reading it), a cycle (its layers in
// order), a shape mismatch (the layer and both shapes), a table two layers
// describe differently, or a loss that does not fit the label or its
// input.
absl::StatusOr<ModelGraph> BuildModelGraph(const ModelDef& model,
                                           uint64_t seed);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_MODEL_GRAPH_H_
