#include "absl/strings/str_cat.h"
#include "worker/nn/layer.h"
#include "worker/nn/layers/layers.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec,
                                                   Backend* backend) {
  switch (spec.def->kind_case()) {
    case LayerDef::kDense:
      return NewDenseLayer(spec, backend);
    case LayerDef::kActivation:
      return NewActivationLayer(spec, backend);
    case LayerDef::kDropout:
      return NewDropoutLayer(spec);
    case LayerDef::kFlatten:
    case LayerDef::kReshape:
      return NewReshapeLayer(spec);
    case LayerDef::kConv2D:
      return NewConv2DLayer(spec, backend);
    case LayerDef::kMaxPool2D:
      return NewMaxPool2DLayer(spec, backend);
    case LayerDef::kConcat:
      return NewConcatLayer(spec);
    case LayerDef::kAdd:
      return NewElementwiseLayer(spec, /*multiply=*/false);
    case LayerDef::kMultiply:
      return NewElementwiseLayer(spec, /*multiply=*/true);
    case LayerDef::kFmOrder2:
      return NewFmOrder2Layer(spec, backend);
    case LayerDef::kDotInteraction:
      return NewDotInteractionLayer(spec, backend);
    case LayerDef::kCross:
      return NewCrossLayer(spec, backend);
    case LayerDef::kBatchNorm:
      return NewBatchNormLayer(spec, backend);
    case LayerDef::kLayerNorm:
      return NewLayerNormLayer(spec, backend);
    default:
      return absl::UnimplementedError(absl::StrCat(
          "layer \"", spec.def->name(), "\": the worker does not run ",
          LayerKindName(*spec.def), " layers yet"));
  }
}

}  // namespace tessera
