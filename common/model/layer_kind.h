// One layer kind of a model description: its name, how many inputs it
// reads, its Keras defaults, its output shape and its variables, in one
// descriptor. layer_kinds.cc holds the table of every kind and answers the
// public functions of layer_kinds.h from it; the descriptors live by group
// (dense_layer_kinds.cc, elementwise_layer_kinds.cc, shape_layer_kinds.cc,
// image_layer_kinds.cc, recommender_layer_kinds.cc), beside the checks
// they share below (layer_kind.cc).
//
// A new kind is one descriptor in its group's file and one line in the
// table (docs/contributing.md lists the rest of a new layer's files).
#ifndef TESSERA_COMMON_MODEL_LAYER_KIND_H_
#define TESSERA_COMMON_MODEL_LAYER_KIND_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model/layer_kinds.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"

namespace tessera {

// `max_inputs` of a kind that reads any number of inputs.
inline constexpr size_t kAnyNumberOfInputs = SIZE_MAX;

struct LayerKind {
  LayerDef::KindCase kind_case;
  const char* name;  // as written in descriptions and errors ("conv2d")
  // Sparse-field kinds (embedding_bag) check their own inputs; every other
  // kind reads between min_inputs and max_inputs dense tensors, checked
  // before infer_shape runs.
  bool reads_sparse;
  size_t min_inputs;
  size_t max_inputs;
  // Writes Keras' default into every unset parameter; null when the kind
  // has none.
  void (*resolve_defaults)(LayerDef* layer);
  // The output shape, or InvalidArgument (LayerError) naming what is wrong.
  absl::StatusOr<Shape> (*infer_shape)(const LayerDef& layer,
                                       absl::Span<const TensorFacts> inputs);
  // The variables it owns, in a fixed order; null when it owns none.
  std::vector<LayerVariable> (*variables)(const LayerDef& layer,
                                          absl::Span<const TensorFacts> inputs);
};

// The descriptors, by group.
extern const LayerKind kDenseLayerKind;           // dense_layer_kinds.cc
extern const LayerKind kCrossLayerKind;           // dense_layer_kinds.cc
extern const LayerKind kActivationLayerKind;      // elementwise_layer_kinds.cc
extern const LayerKind kDropoutLayerKind;         // elementwise_layer_kinds.cc
extern const LayerKind kBatchNormLayerKind;       // elementwise_layer_kinds.cc
extern const LayerKind kLayerNormLayerKind;       // elementwise_layer_kinds.cc
extern const LayerKind kFlattenLayerKind;         // shape_layer_kinds.cc
extern const LayerKind kReshapeLayerKind;         // shape_layer_kinds.cc
extern const LayerKind kConcatLayerKind;          // shape_layer_kinds.cc
extern const LayerKind kAddLayerKind;             // elementwise_layer_kinds.cc
extern const LayerKind kMultiplyLayerKind;        // elementwise_layer_kinds.cc
extern const LayerKind kConv2DLayerKind;          // image_layer_kinds.cc
extern const LayerKind kMaxPool2DLayerKind;       // image_layer_kinds.cc
extern const LayerKind kEmbeddingBagLayerKind;    // recommender_layer_kinds.cc
extern const LayerKind kDotInteractionLayerKind;  // recommender_layer_kinds.cc
extern const LayerKind kFmOrder2LayerKind;        // recommender_layer_kinds.cc

// The checks and builders the descriptors share (layer_kind.cc).

// Shapes multiply into element counts; bound each so no product overflows.
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

// InvalidArgument: layer "<name>" (<kind>): <what>.
absl::Status LayerError(const LayerDef& layer, const std::string& what);

Initializer InitializerOfKind(Initializer::Kind kind);
Initializer GlorotUniform();

// Input `i` must be a vector [d].
absl::Status NeedVector(const LayerDef& layer, int i, const Shape& shape);

// The first input must be an image [h, w, c].
absl::Status NeedImage(const LayerDef& layer, const Shape& shape);

// [h, w] from a repeated field of 1 or 2 values (a single value means
// both), or `fallback` when it is empty.
absl::StatusOr<std::pair<int64_t, int64_t>> Pair(
    const LayerDef& layer, const char* field,
    const google::protobuf::RepeatedField<int64_t>& values,
    std::pair<int64_t, int64_t> fallback);

// The [h, w, channels] a window of `kernel` and `strides` makes of `in`.
absl::StatusOr<Shape> Window(const LayerDef& layer, const Shape& in,
                             std::pair<int64_t, int64_t> kernel,
                             std::pair<int64_t, int64_t> strides,
                             Padding padding, int64_t channels);

LayerVariable Variable(std::string name, Shape shape, Initializer init,
                       LayerVariable::SeedClass seeds);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_LAYER_KIND_H_
