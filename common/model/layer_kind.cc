#include "common/model/layer_kind.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera {

absl::Status LayerError(const LayerDef& layer, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "layer \"", layer.name(), "\" (", LayerKindName(layer), "): ", what));
}

Initializer InitializerOfKind(Initializer::Kind kind) {
  Initializer init;
  init.set_kind(kind);
  return init;
}

Initializer GlorotUniform() {
  return InitializerOfKind(Initializer::GLOROT_UNIFORM);
}

absl::Status NeedVector(const LayerDef& layer, int i, const Shape& shape) {
  if (shape.size() != 1) {
    return LayerError(
        layer, absl::StrCat("input \"", layer.inputs(i), "\" has shape ",
                            ShapeString(shape),
                            ", needs a vector [d] (add a flatten layer)"));
  }
  return absl::OkStatus();
}

absl::Status NeedImage(const LayerDef& layer, const Shape& shape) {
  if (shape.size() != 3) {
    return LayerError(
        layer, absl::StrCat("input \"", layer.inputs(0), "\" has shape ",
                            ShapeString(shape), ", needs an image [h, w, c]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int64_t, int64_t>> Pair(
    const LayerDef& layer, const char* field,
    const google::protobuf::RepeatedField<int64_t>& values,
    std::pair<int64_t, int64_t> fallback) {
  if (values.empty()) return fallback;
  if (values.size() > 2) {
    return LayerError(layer, absl::StrCat(field, " has ", values.size(),
                                          " values, needs 1 or 2"));
  }
  const int64_t h = values[0], w = values.size() == 2 ? values[1] : values[0];
  if (h < 1 || w < 1 || h > (1 << 20) || w > (1 << 20)) {
    return LayerError(layer, absl::StrCat(field, " must be positive, got [",
                                          absl::StrJoin(values, ", "), "]"));
  }
  return std::make_pair(h, w);
}

absl::StatusOr<Shape> Window(const LayerDef& layer, const Shape& in,
                             std::pair<int64_t, int64_t> kernel,
                             std::pair<int64_t, int64_t> strides,
                             Padding padding, int64_t channels) {
  absl::StatusOr<WindowAxis> h =
      WindowAlong(in[0], kernel.first, strides.first, padding);
  absl::StatusOr<WindowAxis> w =
      WindowAlong(in[1], kernel.second, strides.second, padding);
  if (!h.ok() || !w.ok()) {
    return LayerError(
        layer, absl::StrCat("a ", kernel.first, "x", kernel.second,
                            " window with valid padding does not fit input \"",
                            layer.inputs(0), "\" of shape ", ShapeString(in)));
  }
  return Shape{h->out, w->out, channels};
}

LayerVariable Variable(std::string name, Shape shape, Initializer init,
                       LayerVariable::SeedClass seeds) {
  LayerVariable v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.initializer = std::move(init);
  v.seed_class = seeds;
  return v;
}

}  // namespace tessera
