// Layers with weight matrices over vectors: dense and cross (DCN).
#include "absl/strings/str_cat.h"
#include "common/model/layer_kind.h"

namespace tessera {
namespace {

using Seeds = LayerVariable::SeedClass;

void DenseDefaults(LayerDef* layer) {
  DenseLayer* p = layer->mutable_dense();
  if (!p->has_use_bias()) p->set_use_bias(true);
  if (!p->has_kernel_initializer()) {
    *p->mutable_kernel_initializer() = GlorotUniform();
  }
  if (!p->has_bias_initializer() && p->use_bias()) {
    *p->mutable_bias_initializer() = InitializerOfKind(Initializer::ZEROS);
  }
}

absl::StatusOr<Shape> DenseShape(const LayerDef& layer,
                                 absl::Span<const TensorFacts> inputs) {
  const DenseLayer& p = layer.dense();
  if (p.units() < 1) {
    return LayerError(layer,
                      absl::StrCat("units must be >= 1, got ", p.units()));
  }
  for (int i = 0; i < layer.inputs_size(); ++i) {
    if (absl::Status s = NeedVector(layer, i, inputs[i].shape); !s.ok()) {
      return s;
    }
  }
  return Shape{p.units()};
}

std::vector<LayerVariable> DenseVariables(
    const LayerDef& layer, absl::Span<const TensorFacts> inputs) {
  const DenseLayer& p = layer.dense();
  const std::string& name = layer.name();
  std::vector<LayerVariable> vars;
  int64_t fan_in = 0;
  for (const TensorFacts& in : inputs) fan_in += in.shape[0];
  vars.push_back(Variable(absl::StrCat(name, "/kernel"), {fan_in, p.units()},
                          p.kernel_initializer(), Seeds::kDenseKernel));
  if (p.use_bias()) {
    vars.push_back(Variable(absl::StrCat(name, "/bias"), {p.units()},
                            p.bias_initializer(), Seeds::kOther));
  }
  return vars;
}

void CrossDefaults(LayerDef* layer) {
  CrossLayer* p = layer->mutable_cross();
  if (p->num_layers() == 0) p->set_num_layers(1);
  if (!p->has_kernel_initializer()) {
    *p->mutable_kernel_initializer() = GlorotUniform();
  }
}

absl::StatusOr<Shape> CrossShape(const LayerDef& layer,
                                 absl::Span<const TensorFacts> inputs) {
  const CrossLayer& p = layer.cross();
  if (absl::Status s = NeedVector(layer, 0, inputs[0].shape); !s.ok()) {
    return s;
  }
  if (p.num_layers() < 1 || p.num_layers() > 64) {
    return LayerError(layer, absl::StrCat("num_layers must be in [1, 64], "
                                          "got ",
                                          p.num_layers()));
  }
  if (p.projection_dim() < 0 ||
      (p.version() == CrossLayer::V1 && p.projection_dim() != 0)) {
    return LayerError(layer, absl::StrCat("projection_dim must be >= 0 (and 0 "
                                          "for version V1), got ",
                                          p.projection_dim()));
  }
  return inputs[0].shape;
}

std::vector<LayerVariable> CrossVariables(
    const LayerDef& layer, absl::Span<const TensorFacts> inputs) {
  const CrossLayer& p = layer.cross();
  const std::string& name = layer.name();
  std::vector<LayerVariable> vars;
  const int64_t d = inputs[0].shape[0];
  for (int l = 0; l < p.num_layers(); ++l) {
    if (p.version() == CrossLayer::V1) {
      vars.push_back(Variable(absl::StrCat(name, "/kernel_", l), {d, 1},
                              p.kernel_initializer(), Seeds::kOther));
    } else if (p.projection_dim() == 0) {
      vars.push_back(Variable(absl::StrCat(name, "/kernel_", l), {d, d},
                              p.kernel_initializer(), Seeds::kOther));
    } else {
      const int64_t r = p.projection_dim();
      vars.push_back(Variable(absl::StrCat(name, "/down_", l), {d, r},
                              p.kernel_initializer(), Seeds::kOther));
      vars.push_back(Variable(absl::StrCat(name, "/up_", l), {r, d},
                              p.kernel_initializer(), Seeds::kOther));
    }
    vars.push_back(Variable(absl::StrCat(name, "/bias_", l), {d},
                            InitializerOfKind(Initializer::ZEROS),
                            Seeds::kOther));
  }
  return vars;
}

}  // namespace

extern const LayerKind kDenseLayerKind = {
    LayerDef::kDense,   "dense",       false,      1,
    kAnyNumberOfInputs, DenseDefaults, DenseShape, DenseVariables};

extern const LayerKind kCrossLayerKind = {
    LayerDef::kCross, "cross",    false,         1, 1,
    CrossDefaults,    CrossShape, CrossVariables};

}  // namespace tessera
