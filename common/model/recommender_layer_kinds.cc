// The recommendation models' layers: embedding_bag over sparse fields, and
// the feature-vector interactions dot_interaction (DLRM) and fm_order2
// (DeepFM).
#include "absl/strings/str_cat.h"
#include "common/model/layer_kind.h"

namespace tessera {
namespace {

constexpr float kEmbeddingInitRange = 0.05f;  // Keras' Embedding: ±0.05

void EmbeddingBagDefaults(LayerDef* layer) {
  EmbeddingBagLayer* p = layer->mutable_embedding_bag();
  if (p->table().empty()) p->set_table(layer->name());
  if (!p->has_initializer()) {
    Initializer init = InitializerOfKind(Initializer::UNIFORM);
    init.set_minval(-kEmbeddingInitRange);
    init.set_maxval(kEmbeddingInitRange);
    *p->mutable_initializer() = init;
  }
}

absl::StatusOr<Shape> EmbeddingBagShape(const LayerDef& layer,
                                        absl::Span<const TensorFacts> inputs) {
  const EmbeddingBagLayer& p = layer.embedding_bag();
  if (inputs.empty()) {
    return LayerError(layer, "reads no sparse field");
  }
  if (p.dim() < 1) {
    return LayerError(layer, absl::StrCat("dim must be >= 1, got ", p.dim()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].sparse) {
      return LayerError(layer,
                        absl::StrCat("input \"", layer.inputs(i),
                                     "\" is not a sparse field (shape ",
                                     ShapeString(inputs[i].shape),
                                     "); embedding_bag reads sparse fields"));
    }
    if (inputs[i].vocab_size != inputs[0].vocab_size) {
      return LayerError(
          layer, absl::StrCat("fields \"", layer.inputs(0), "\" and \"",
                              layer.inputs(i), "\" share table \"", p.table(),
                              "\" but have vocab_size ", inputs[0].vocab_size,
                              " and ", inputs[i].vocab_size));
    }
  }
  return inputs.size() == 1
             ? Shape{p.dim()}
             : Shape{static_cast<int64_t>(inputs.size()), p.dim()};
}

std::vector<LayerVariable> EmbeddingBagVariables(
    const LayerDef& layer, absl::Span<const TensorFacts> inputs) {
  const EmbeddingBagLayer& p = layer.embedding_bag();
  LayerVariable table =
      Variable(p.table(), {inputs[0].vocab_size, p.dim()}, p.initializer(),
               LayerVariable::SeedClass::kTable);
  table.sparse = true;
  std::vector<LayerVariable> vars;
  vars.push_back(std::move(table));
  return vars;
}

// DotInteraction and FmOrder2 read feature vectors of one width: each input
// [d] or [n, d]. Returns the number of vectors and d.
absl::StatusOr<std::pair<int64_t, int64_t>> FeatureVectors(
    const LayerDef& layer, absl::Span<const TensorFacts> inputs) {
  int64_t count = 0, width = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& s = inputs[i].shape;
    if (s.size() != 1 && s.size() != 2) {
      return LayerError(
          layer, absl::StrCat("input \"", layer.inputs(i), "\" has shape ",
                              ShapeString(s), ", needs [d] or [n, d]"));
    }
    const int64_t d = s.back();
    if (width >= 0 && d != width) {
      return LayerError(
          layer, absl::StrCat("input \"", layer.inputs(i), "\" has shape ",
                              ShapeString(s), " but \"", layer.inputs(0),
                              "\" has vectors of width ", width,
                              "; all feature vectors need one width"));
    }
    width = d;
    count += s.size() == 2 ? s[0] : 1;
  }
  return std::make_pair(count, width);
}

absl::StatusOr<Shape> DotInteractionShape(
    const LayerDef& layer, absl::Span<const TensorFacts> inputs) {
  auto vectors = FeatureVectors(layer, inputs);
  if (!vectors.ok()) return vectors.status();
  const int64_t f = vectors->first;
  if (f < 2) {
    return LayerError(
        layer, absl::StrCat("needs at least 2 feature vectors, got ", f));
  }
  int64_t width = f * (f - 1) / 2;
  if (layer.dot_interaction().self_interaction()) width += f;
  if (layer.dot_interaction().concat_first_input()) {
    width += NumElements(inputs[0].shape);
  }
  return Shape{width};
}

absl::StatusOr<Shape> FmOrder2Shape(const LayerDef& layer,
                                    absl::Span<const TensorFacts> inputs) {
  auto vectors = FeatureVectors(layer, inputs);
  if (!vectors.ok()) return vectors.status();
  return Shape{vectors->second};
}

}  // namespace

extern const LayerKind kEmbeddingBagLayerKind = {LayerDef::kEmbeddingBag,
                                                 "embedding_bag",
                                                 true,
                                                 1,
                                                 kAnyNumberOfInputs,
                                                 EmbeddingBagDefaults,
                                                 EmbeddingBagShape,
                                                 EmbeddingBagVariables};

extern const LayerKind kDotInteractionLayerKind = {LayerDef::kDotInteraction,
                                                   "dot_interaction",
                                                   false,
                                                   1,
                                                   kAnyNumberOfInputs,
                                                   nullptr,
                                                   DotInteractionShape,
                                                   nullptr};

extern const LayerKind kFmOrder2LayerKind = {
    LayerDef::kFmOrder2, "fm_order2", false,         1,
    kAnyNumberOfInputs,  nullptr,     FmOrder2Shape, nullptr};

}  // namespace tessera
