#ifndef TESSERA_COMMON_MODEL_LAYER_KINDS_H_
#define TESSERA_COMMON_MODEL_LAYER_KINDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/job.pb.h"
#include "proto/model.pb.h"

namespace tessera {

// A per-example shape (the batch dimension is never part of it).
using Shape = std::vector<int64_t>;

// "[28, 28, 1]".
std::string ShapeString(const Shape& shape);
int64_t NumElements(const Shape& shape);

// What the graph knows about a tensor when a layer reads it.
struct TensorFacts {
  Shape shape;  // a sparse field: [max_hotness]
  bool sparse = false;
  int64_t vocab_size = 0;  // sparse fields: 0 means hashed ids
};

// A variable a layer needs, before the job's seed is known.
struct LayerVariable {
  std::string name;  // full name, e.g. "fc1/kernel" or a table's name
  Shape shape;
  Initializer initializer;  // seed, fan_in and fan_out unset
  bool sparse = false;      // an embedding table, pulled and pushed by rows
  // Which stream of seeds its initial values come from (kept apart so the
  // first models' variables keep the values they always had).
  enum class SeedClass { kDenseKernel, kTable, kOther };
  SeedClass seed_class = SeedClass::kOther;
  // A fixed update rule instead of the job's optimizer (BatchNorm's moving
  // statistics: a moving average of what the workers push).
  std::optional<OptimizerConfig> update_rule;
};

// The kind of a layer as written in the description ("dense", "conv2d").
std::string LayerKindName(const LayerDef& layer);

// Writes Keras' default into every parameter of `layer` that is unset, so
// the description means one thing to Tessera, to a reader and to an
// export. Never fails on a parameter that is set.
void ResolveLayerDefaults(LayerDef* layer);

// The shape `layer` writes for inputs of `inputs`' facts, or
// InvalidArgument naming the layer, the offending input and both shapes.
// REQUIRES: ResolveLayerDefaults(layer) was applied.
absl::StatusOr<Shape> InferLayerShape(const LayerDef& layer,
                                      absl::Span<const TensorFacts> inputs);

// The variables `layer` owns, in a fixed order. REQUIRES: InferLayerShape
// succeeded for the same inputs.
std::vector<LayerVariable> LayerVariables(const LayerDef& layer,
                                          absl::Span<const TensorFacts> inputs);

// The geometry of a Conv2D or MaxPool2D window along one axis: output size
// and the padding before the first element (TF's SAME puts the odd pixel
// after the last).
struct WindowAxis {
  int64_t out = 0;
  int64_t pad_before = 0;
};
absl::StatusOr<WindowAxis> WindowAlong(int64_t in, int64_t kernel,
                                       int64_t stride, Padding padding);

}  // namespace tessera

#endif  // TESSERA_COMMON_MODEL_LAYER_KINDS_H_
