// Layers whose output has their input's shape: activation, dropout, the two
// normalizations, and the elementwise add and multiply of several inputs.
#include "absl/strings/str_cat.h"
#include "common/model/layer_kind.h"

namespace tessera {
namespace {

using Seeds = LayerVariable::SeedClass;

// Keras' defaults.
constexpr float kBatchNormMomentum = 0.99f;
constexpr float kNormEpsilon = 1e-3f;  // BatchNormalization, LayerNormalization

absl::StatusOr<Shape> SameShape(const LayerDef&,
                                absl::Span<const TensorFacts> inputs) {
  return inputs[0].shape;
}

absl::StatusOr<Shape> DropoutShape(const LayerDef& layer,
                                   absl::Span<const TensorFacts> inputs) {
  if (!(layer.dropout().rate() >= 0 && layer.dropout().rate() < 1)) {
    return LayerError(layer, absl::StrCat("rate must be in [0, 1), got ",
                                          layer.dropout().rate()));
  }
  return inputs[0].shape;
}

// gamma and beta, one per channel (the last axis).
std::vector<LayerVariable> ScaleAndShift(const LayerDef& layer,
                                         absl::Span<const TensorFacts> inputs) {
  const int64_t c = inputs[0].shape.back();
  std::vector<LayerVariable> vars;
  vars.push_back(Variable(absl::StrCat(layer.name(), "/gamma"), {c},
                          InitializerOfKind(Initializer::ONES), Seeds::kOther));
  vars.push_back(Variable(absl::StrCat(layer.name(), "/beta"), {c},
                          InitializerOfKind(Initializer::ZEROS),
                          Seeds::kOther));
  return vars;
}

void BatchNormDefaults(LayerDef* layer) {
  BatchNormLayer* p = layer->mutable_batch_norm();
  if (!p->has_momentum()) p->set_momentum(kBatchNormMomentum);
  if (!p->has_epsilon()) p->set_epsilon(kNormEpsilon);
}

absl::StatusOr<Shape> BatchNormShape(const LayerDef& layer,
                                     absl::Span<const TensorFacts> inputs) {
  if (!(layer.batch_norm().momentum() >= 0 &&
        layer.batch_norm().momentum() < 1)) {
    return LayerError(layer, absl::StrCat("momentum must be in [0, 1), got ",
                                          layer.batch_norm().momentum()));
  }
  if (!(layer.batch_norm().epsilon() > 0)) {
    return LayerError(layer, "epsilon must be > 0");
  }
  return inputs[0].shape;
}

// gamma and beta, then the moving statistics, which follow a moving
// average of what the workers push instead of the job's optimizer.
std::vector<LayerVariable> BatchNormVariables(
    const LayerDef& layer, absl::Span<const TensorFacts> inputs) {
  const int64_t c = inputs[0].shape.back();
  const std::string& name = layer.name();
  std::vector<LayerVariable> vars = ScaleAndShift(layer, inputs);
  OptimizerConfig moving;
  moving.mutable_moving_average()->set_momentum(layer.batch_norm().momentum());
  LayerVariable mean =
      Variable(absl::StrCat(name, "/moving_mean"), {c},
               InitializerOfKind(Initializer::ZEROS), Seeds::kOther);
  mean.update_rule = moving;
  LayerVariable var =
      Variable(absl::StrCat(name, "/moving_variance"), {c},
               InitializerOfKind(Initializer::ONES), Seeds::kOther);
  var.update_rule = moving;
  vars.push_back(std::move(mean));
  vars.push_back(std::move(var));
  return vars;
}

void LayerNormDefaults(LayerDef* layer) {
  LayerNormLayer* p = layer->mutable_layer_norm();
  if (!p->has_epsilon()) p->set_epsilon(kNormEpsilon);
}

absl::StatusOr<Shape> LayerNormShape(const LayerDef& layer,
                                     absl::Span<const TensorFacts> inputs) {
  if (!(layer.layer_norm().epsilon() > 0)) {
    return LayerError(layer, "epsilon must be > 0");
  }
  return inputs[0].shape;
}

// Add and multiply: every input has the first's shape.
absl::StatusOr<Shape> ElementwiseShape(const LayerDef& layer,
                                       absl::Span<const TensorFacts> inputs) {
  const Shape& first = inputs[0].shape;
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].shape != first) {
      return LayerError(
          layer, absl::StrCat("input \"", layer.inputs(i), "\" has shape ",
                              ShapeString(inputs[i].shape), " but \"",
                              layer.inputs(0), "\" has ", ShapeString(first)));
    }
  }
  return first;
}

}  // namespace

extern const LayerKind kActivationLayerKind = {LayerDef::kActivation,
                                               "activation",
                                               false,
                                               1,
                                               1,
                                               nullptr,
                                               SameShape,
                                               nullptr};

extern const LayerKind kDropoutLayerKind = {
    LayerDef::kDropout, "dropout", false, 1, 1, nullptr, DropoutShape, nullptr};

extern const LayerKind kBatchNormLayerKind = {
    LayerDef::kBatchNorm, "batch_norm",      false, 1, 1, BatchNormDefaults,
    BatchNormShape,       BatchNormVariables};

extern const LayerKind kLayerNormLayerKind = {
    LayerDef::kLayerNorm, "layer_norm",   false,        1, 1,
    LayerNormDefaults,    LayerNormShape, ScaleAndShift};

extern const LayerKind kAddLayerKind = {
    LayerDef::kAdd,   "add",  false, 2, kAnyNumberOfInputs, nullptr,
    ElementwiseShape, nullptr};

extern const LayerKind kMultiplyLayerKind = {
    LayerDef::kMultiply, "multiply", false, 2, kAnyNumberOfInputs, nullptr,
    ElementwiseShape,    nullptr};

}  // namespace tessera
