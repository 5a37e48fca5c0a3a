// Layers that only rearrange values: flatten, reshape and concat.
#include "absl/strings/str_cat.h"
#include "common/model/layer_kind.h"

namespace tessera {
namespace {

absl::StatusOr<Shape> FlattenShape(const LayerDef&,
                                   absl::Span<const TensorFacts> inputs) {
  return Shape{NumElements(inputs[0].shape)};
}

// At most one size is -1: it takes what the others leave.
absl::StatusOr<Shape> ReshapeShape(const LayerDef& layer,
                                   absl::Span<const TensorFacts> inputs) {
  const Shape& in = inputs[0].shape;
  const int64_t total = NumElements(in);
  int64_t known = 1, unknown = -1;
  for (int i = 0; i < layer.reshape().shape_size(); ++i) {
    const int64_t d = layer.reshape().shape(i);
    if (d == -1 && unknown < 0) {
      unknown = i;
    } else if (d < 1 || d > kMaxElements) {
      return LayerError(
          layer, absl::StrCat("shape ",
                              ShapeString({layer.reshape().shape().begin(),
                                           layer.reshape().shape().end()}),
                              " needs positive sizes and at most one -1"));
    } else {
      known *= d;
      if (known > kMaxElements) break;
    }
  }
  Shape out(layer.reshape().shape().begin(), layer.reshape().shape().end());
  if (out.empty()) return LayerError(layer, "needs a shape");
  if (unknown >= 0 && known > 0 && total % known == 0) {
    out[unknown] = total / known;
  }
  if (NumElements(out) != total || known > kMaxElements) {
    return LayerError(layer,
                      absl::StrCat("cannot reshape input \"", layer.inputs(0),
                                   "\" of shape ", ShapeString(in), " (", total,
                                   " values) to ", ShapeString(out)));
  }
  return out;
}

void ConcatDefaults(LayerDef* layer) {
  ConcatLayer* p = layer->mutable_concat();
  if (!p->has_axis()) p->set_axis(-1);
}

absl::StatusOr<Shape> ConcatShape(const LayerDef& layer,
                                  absl::Span<const TensorFacts> inputs) {
  const Shape& first = inputs[0].shape;
  const int rank = static_cast<int>(first.size());
  int axis = layer.concat().axis();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    return LayerError(layer, absl::StrCat("axis ", layer.concat().axis(),
                                          " is outside inputs of rank ", rank));
  }
  Shape out = first;
  out[axis] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& s = inputs[i].shape;
    bool fits = static_cast<int>(s.size()) == rank;
    for (int d = 0; fits && d < rank; ++d) {
      if (d != axis && s[d] != first[d]) fits = false;
    }
    if (!fits) {
      return LayerError(layer, absl::StrCat("input \"", layer.inputs(i),
                                            "\" of shape ", ShapeString(s),
                                            " does not fit \"", layer.inputs(0),
                                            "\" of shape ", ShapeString(first),
                                            " along every axis but ", axis));
    }
    out[axis] += s[axis];
  }
  return out;
}

}  // namespace

extern const LayerKind kFlattenLayerKind = {
    LayerDef::kFlatten, "flatten", false, 1, 1, nullptr, FlattenShape, nullptr};

extern const LayerKind kReshapeLayerKind = {
    LayerDef::kReshape, "reshape", false, 1, 1, nullptr, ReshapeShape, nullptr};

extern const LayerKind kConcatLayerKind = {
    LayerDef::kConcat,  "concat",       false,       1,
    kAnyNumberOfInputs, ConcatDefaults, ConcatShape, nullptr};

}  // namespace tessera
