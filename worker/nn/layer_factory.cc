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
    default:
      return absl::UnimplementedError(absl::StrCat(
          "layer \"", spec.def->name(), "\": the worker does not run ",
          LayerKindName(*spec.def), " layers yet"));
  }
}

}  // namespace tessera
