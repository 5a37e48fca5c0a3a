#include "common/model/layer_kinds.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/layer_kind.h"

namespace tessera {
namespace {

// Every kind a description can name: one line per kind, its descriptor in
// the file of its group (layer_kind.h).
constexpr const LayerKind* kLayerKinds[] = {
    &kDenseLayerKind,        &kActivationLayerKind,
    &kDropoutLayerKind,      &kBatchNormLayerKind,
    &kLayerNormLayerKind,    &kConv2DLayerKind,
    &kMaxPool2DLayerKind,    &kFlattenLayerKind,
    &kReshapeLayerKind,      &kConcatLayerKind,
    &kAddLayerKind,          &kMultiplyLayerKind,
    &kEmbeddingBagLayerKind, &kDotInteractionLayerKind,
    &kCrossLayerKind,        &kFmOrder2LayerKind,
};

// Null for KIND_NOT_SET.
const LayerKind* FindKind(LayerDef::KindCase kind_case) {
  for (const LayerKind* kind : kLayerKinds) {
    if (kind->kind_case == kind_case) return kind;
  }
  return nullptr;
}

// Checks the count of inputs and that none is a sparse field.
absl::Status DenseInputs(const LayerDef& layer,
                         absl::Span<const TensorFacts> inputs, size_t min,
                         size_t max) {
  if (inputs.size() < min || inputs.size() > max) {
    std::string want = min == max ? absl::StrCat(min)
                       : max == kAnyNumberOfInputs
                           ? absl::StrCat("at least ", min)
                           : absl::StrCat(min, " to ", max);
    return LayerError(
        layer, absl::StrCat("reads ", inputs.size(), " inputs, needs ", want));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].sparse) {
      return LayerError(layer,
                        absl::StrCat("input \"", layer.inputs(i),
                                     "\" is a sparse field; only embedding_bag "
                                     "layers read sparse fields"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSize(const LayerDef& layer, const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 1 || n > kMaxElements / d) {
      return LayerError(layer, absl::StrCat("output shape ", ShapeString(shape),
                                            " is empty or too large"));
    }
    n *= d;
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShapeString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string LayerKindName(const LayerDef& layer) {
  const LayerKind* kind = FindKind(layer.kind_case());
  return kind != nullptr ? kind->name : "no kind";
}

absl::StatusOr<WindowAxis> WindowAlong(int64_t in, int64_t kernel,
                                       int64_t stride, Padding padding) {
  WindowAxis axis;
  if (padding == SAME) {
    axis.out = (in + stride - 1) / stride;
    const int64_t total =
        std::max<int64_t>((axis.out - 1) * stride + kernel - in, 0);
    axis.pad_before = total / 2;
    return axis;
  }
  if (in < kernel) {
    return absl::InvalidArgumentError(
        absl::StrCat("window ", kernel, " is larger than the input ", in));
  }
  axis.out = (in - kernel) / stride + 1;
  return axis;
}

void ResolveLayerDefaults(LayerDef* layer) {
  if (layer->output().empty()) layer->set_output(layer->name());
  const LayerKind* kind = FindKind(layer->kind_case());
  if (kind != nullptr && kind->resolve_defaults != nullptr) {
    kind->resolve_defaults(layer);
  }
}

absl::StatusOr<Shape> InferLayerShape(const LayerDef& layer,
                                      absl::Span<const TensorFacts> inputs) {
  const LayerKind* kind = FindKind(layer.kind_case());
  if (kind == nullptr) {
    return LayerError(layer,
                      "sets no kind (dense, conv2d, embedding_bag, ...)");
  }
  if (!kind->reads_sparse) {
    if (absl::Status s =
            DenseInputs(layer, inputs, kind->min_inputs, kind->max_inputs);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<Shape> out = kind->infer_shape(layer, inputs);
  if (!out.ok()) return out.status();
  if (absl::Status s = CheckSize(layer, *out); !s.ok()) return s;
  return out;
}

std::vector<LayerVariable> LayerVariables(
    const LayerDef& layer, absl::Span<const TensorFacts> inputs) {
  const LayerKind* kind = FindKind(layer.kind_case());
  if (kind == nullptr || kind->variables == nullptr) return {};
  return kind->variables(layer, inputs);
}

}  // namespace tessera
