#include "common/model/layer_kinds.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera {
namespace {

// Keras' defaults.
constexpr float kEmbeddingInitRange = 0.05f;  // Embedding: uniform ±0.05
constexpr float kBatchNormMomentum = 0.99f;
constexpr float kNormEpsilon = 1e-3f;  // BatchNormalization, LayerNormalization
// Shapes multiply into element counts; bound each so no product overflows.
constexpr int64_t kMaxElements = int64_t{1} << 40;

absl::Status LayerError(const LayerDef& layer, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "layer \"", layer.name(), "\" (", LayerKindName(layer), "): ", what));
}

Initializer Kind(Initializer::Kind kind) {
  Initializer init;
  init.set_kind(kind);
  return init;
}

Initializer GlorotUniform() { return Kind(Initializer::GLOROT_UNIFORM); }

Initializer EmbeddingUniform() {
  Initializer init = Kind(Initializer::UNIFORM);
  init.set_minval(-kEmbeddingInitRange);
  init.set_maxval(kEmbeddingInitRange);
  return init;
}

// Checks the count of inputs and that none is a sparse field.
absl::Status DenseInputs(const LayerDef& layer,
                         absl::Span<const TensorFacts> inputs, size_t min,
                         size_t max) {
  if (inputs.size() < min || inputs.size() > max) {
    std::string want = min == max        ? absl::StrCat(min)
                       : max == SIZE_MAX ? absl::StrCat("at least ", min)
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

absl::Status NeedVector(const LayerDef& layer, int i, const Shape& shape) {
  if (shape.size() != 1) {
    return LayerError(
        layer, absl::StrCat("input \"", layer.inputs(i), "\" has shape ",
                            ShapeString(shape),
                            ", needs a vector [d] (add a flatten layer)"));
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

// [h, w] from a repeated field of 1 or 2 values (a single value means
// both), or `fallback` when it is empty.
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

absl::Status NeedImage(const LayerDef& layer, const Shape& shape) {
  if (shape.size() != 3) {
    return LayerError(
        layer, absl::StrCat("input \"", layer.inputs(0), "\" has shape ",
                            ShapeString(shape), ", needs an image [h, w, c]"));
  }
  return absl::OkStatus();
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

LayerVariable Variable(std::string name, Shape shape, Initializer init,
                       LayerVariable::SeedClass seeds) {
  LayerVariable v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.initializer = std::move(init);
  v.seed_class = seeds;
  return v;
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
  switch (layer.kind_case()) {
    case LayerDef::kDense:
      return "dense";
    case LayerDef::kActivation:
      return "activation";
    case LayerDef::kDropout:
      return "dropout";
    case LayerDef::kBatchNorm:
      return "batch_norm";
    case LayerDef::kLayerNorm:
      return "layer_norm";
    case LayerDef::kConv2D:
      return "conv2d";
    case LayerDef::kMaxPool2D:
      return "max_pool2d";
    case LayerDef::kFlatten:
      return "flatten";
    case LayerDef::kReshape:
      return "reshape";
    case LayerDef::kConcat:
      return "concat";
    case LayerDef::kAdd:
      return "add";
    case LayerDef::kMultiply:
      return "multiply";
    case LayerDef::kEmbeddingBag:
      return "embedding_bag";
    case LayerDef::kDotInteraction:
      return "dot_interaction";
    case LayerDef::kCross:
      return "cross";
    case LayerDef::kFmOrder2:
      return "fm_order2";
    case LayerDef::KIND_NOT_SET:
      break;
  }
  return "no kind";
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
  switch (layer->kind_case()) {
    case LayerDef::kDense: {
      DenseLayer* p = layer->mutable_dense();
      if (!p->has_use_bias()) p->set_use_bias(true);
      if (!p->has_kernel_initializer()) {
        *p->mutable_kernel_initializer() = GlorotUniform();
      }
      if (!p->has_bias_initializer() && p->use_bias()) {
        *p->mutable_bias_initializer() = Kind(Initializer::ZEROS);
      }
      break;
    }
    case LayerDef::kBatchNorm: {
      BatchNormLayer* p = layer->mutable_batch_norm();
      if (!p->has_momentum()) p->set_momentum(kBatchNormMomentum);
      if (!p->has_epsilon()) p->set_epsilon(kNormEpsilon);
      break;
    }
    case LayerDef::kLayerNorm: {
      LayerNormLayer* p = layer->mutable_layer_norm();
      if (!p->has_epsilon()) p->set_epsilon(kNormEpsilon);
      break;
    }
    case LayerDef::kConv2D: {
      Conv2DLayer* p = layer->mutable_conv2d();
      if (p->kernel_size_size() == 1) p->add_kernel_size(p->kernel_size(0));
      if (p->strides_size() == 0) {
        p->add_strides(1);
        p->add_strides(1);
      } else if (p->strides_size() == 1) {
        p->add_strides(p->strides(0));
      }
      if (!p->has_use_bias()) p->set_use_bias(true);
      if (!p->has_kernel_initializer()) {
        *p->mutable_kernel_initializer() = GlorotUniform();
      }
      if (!p->has_bias_initializer() && p->use_bias()) {
        *p->mutable_bias_initializer() = Kind(Initializer::ZEROS);
      }
      break;
    }
    case LayerDef::kMaxPool2D: {
      MaxPool2DLayer* p = layer->mutable_max_pool2d();
      if (p->pool_size_size() == 0) {
        p->add_pool_size(2);
        p->add_pool_size(2);
      } else if (p->pool_size_size() == 1) {
        p->add_pool_size(p->pool_size(0));
      }
      if (p->strides_size() == 0) {
        *p->mutable_strides() = p->pool_size();
      } else if (p->strides_size() == 1) {
        p->add_strides(p->strides(0));
      }
      break;
    }
    case LayerDef::kConcat: {
      ConcatLayer* p = layer->mutable_concat();
      if (!p->has_axis()) p->set_axis(-1);
      break;
    }
    case LayerDef::kEmbeddingBag: {
      EmbeddingBagLayer* p = layer->mutable_embedding_bag();
      if (p->table().empty()) p->set_table(layer->name());
      if (!p->has_initializer()) *p->mutable_initializer() = EmbeddingUniform();
      break;
    }
    case LayerDef::kCross: {
      CrossLayer* p = layer->mutable_cross();
      if (p->num_layers() == 0) p->set_num_layers(1);
      if (!p->has_kernel_initializer()) {
        *p->mutable_kernel_initializer() = GlorotUniform();
      }
      break;
    }
    default:
      break;
  }
}

absl::StatusOr<Shape> InferLayerShape(const LayerDef& layer,
                                      absl::Span<const TensorFacts> inputs) {
  auto shape_of = [&](int i) -> const Shape& { return inputs[i].shape; };
  const bool embedding = layer.kind_case() == LayerDef::kEmbeddingBag;
  if (!embedding && layer.kind_case() != LayerDef::KIND_NOT_SET) {
    size_t min = 1, max = 1;
    switch (layer.kind_case()) {
      case LayerDef::kDense:
      case LayerDef::kConcat:
      case LayerDef::kDotInteraction:
      case LayerDef::kFmOrder2:
        max = SIZE_MAX;
        break;
      case LayerDef::kAdd:
      case LayerDef::kMultiply:
        min = 2;
        max = SIZE_MAX;
        break;
      default:
        break;
    }
    if (absl::Status s = DenseInputs(layer, inputs, min, max); !s.ok()) {
      return s;
    }
  }
  Shape out;
  switch (layer.kind_case()) {
    case LayerDef::KIND_NOT_SET:
      return LayerError(layer,
                        "sets no kind (dense, conv2d, embedding_bag, ...)");
    case LayerDef::kDense: {
      const DenseLayer& p = layer.dense();
      if (p.units() < 1) {
        return LayerError(layer,
                          absl::StrCat("units must be >= 1, got ", p.units()));
      }
      for (int i = 0; i < layer.inputs_size(); ++i) {
        if (absl::Status s = NeedVector(layer, i, shape_of(i)); !s.ok()) {
          return s;
        }
      }
      out = {p.units()};
      break;
    }
    case LayerDef::kActivation:
    case LayerDef::kBatchNorm:
    case LayerDef::kLayerNorm:
      if (layer.has_batch_norm() && !(layer.batch_norm().momentum() >= 0 &&
                                      layer.batch_norm().momentum() < 1)) {
        return LayerError(layer,
                          absl::StrCat("momentum must be in [0, 1), got ",
                                       layer.batch_norm().momentum()));
      }
      if ((layer.has_batch_norm() && !(layer.batch_norm().epsilon() > 0)) ||
          (layer.has_layer_norm() && !(layer.layer_norm().epsilon() > 0))) {
        return LayerError(layer, "epsilon must be > 0");
      }
      out = shape_of(0);
      break;
    case LayerDef::kDropout:
      if (!(layer.dropout().rate() >= 0 && layer.dropout().rate() < 1)) {
        return LayerError(layer, absl::StrCat("rate must be in [0, 1), got ",
                                              layer.dropout().rate()));
      }
      out = shape_of(0);
      break;
    case LayerDef::kConv2D: {
      const Conv2DLayer& p = layer.conv2d();
      if (absl::Status s = NeedImage(layer, shape_of(0)); !s.ok()) return s;
      if (p.filters() < 1) {
        return LayerError(
            layer, absl::StrCat("filters must be >= 1, got ", p.filters()));
      }
      if (p.kernel_size_size() == 0) {
        return LayerError(layer, "needs kernel_size");
      }
      auto kernel = Pair(layer, "kernel_size", p.kernel_size(), {0, 0});
      if (!kernel.ok()) return kernel.status();
      auto strides = Pair(layer, "strides", p.strides(), {1, 1});
      if (!strides.ok()) return strides.status();
      absl::StatusOr<Shape> s = Window(layer, shape_of(0), *kernel, *strides,
                                       p.padding(), p.filters());
      if (!s.ok()) return s.status();
      out = *s;
      break;
    }
    case LayerDef::kMaxPool2D: {
      const MaxPool2DLayer& p = layer.max_pool2d();
      if (absl::Status s = NeedImage(layer, shape_of(0)); !s.ok()) return s;
      auto pool = Pair(layer, "pool_size", p.pool_size(), {2, 2});
      if (!pool.ok()) return pool.status();
      auto strides = Pair(layer, "strides", p.strides(), *pool);
      if (!strides.ok()) return strides.status();
      absl::StatusOr<Shape> s = Window(layer, shape_of(0), *pool, *strides,
                                       p.padding(), shape_of(0)[2]);
      if (!s.ok()) return s.status();
      out = *s;
      break;
    }
    case LayerDef::kFlatten:
      out = {NumElements(shape_of(0))};
      break;
    case LayerDef::kReshape: {
      const int64_t total = NumElements(shape_of(0));
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
      out.assign(layer.reshape().shape().begin(),
                 layer.reshape().shape().end());
      if (out.empty()) return LayerError(layer, "needs a shape");
      if (unknown >= 0 && known > 0 && total % known == 0) {
        out[unknown] = total / known;
      }
      if (NumElements(out) != total || known > kMaxElements) {
        return LayerError(
            layer, absl::StrCat("cannot reshape input \"", layer.inputs(0),
                                "\" of shape ", ShapeString(shape_of(0)), " (",
                                total, " values) to ", ShapeString(out)));
      }
      break;
    }
    case LayerDef::kConcat: {
      const int rank = static_cast<int>(shape_of(0).size());
      int axis = layer.concat().axis();
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) {
        return LayerError(layer,
                          absl::StrCat("axis ", layer.concat().axis(),
                                       " is outside inputs of rank ", rank));
      }
      out = shape_of(0);
      out[axis] = 0;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const Shape& s = shape_of(i);
        bool fits = static_cast<int>(s.size()) == rank;
        for (int d = 0; fits && d < rank; ++d) {
          if (d != axis && s[d] != shape_of(0)[d]) fits = false;
        }
        if (!fits) {
          return LayerError(
              layer,
              absl::StrCat("input \"", layer.inputs(i), "\" of shape ",
                           ShapeString(s), " does not fit \"", layer.inputs(0),
                           "\" of shape ", ShapeString(shape_of(0)),
                           " along every axis but ", axis));
        }
        out[axis] += s[axis];
      }
      break;
    }
    case LayerDef::kAdd:
    case LayerDef::kMultiply:
      for (size_t i = 1; i < inputs.size(); ++i) {
        if (shape_of(i) != shape_of(0)) {
          return LayerError(
              layer,
              absl::StrCat("input \"", layer.inputs(i), "\" has shape ",
                           ShapeString(shape_of(i)), " but \"", layer.inputs(0),
                           "\" has ", ShapeString(shape_of(0))));
        }
      }
      out = shape_of(0);
      break;
    case LayerDef::kEmbeddingBag: {
      const EmbeddingBagLayer& p = layer.embedding_bag();
      if (inputs.empty()) {
        return LayerError(layer, "reads no sparse field");
      }
      if (p.dim() < 1) {
        return LayerError(layer,
                          absl::StrCat("dim must be >= 1, got ", p.dim()));
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i].sparse) {
          return LayerError(
              layer, absl::StrCat("input \"", layer.inputs(i),
                                  "\" is not a sparse field (shape ",
                                  ShapeString(shape_of(i)),
                                  "); embedding_bag reads sparse fields"));
        }
        if (inputs[i].vocab_size != inputs[0].vocab_size) {
          return LayerError(
              layer,
              absl::StrCat("fields \"", layer.inputs(0), "\" and \"",
                           layer.inputs(i), "\" share table \"", p.table(),
                           "\" but have vocab_size ", inputs[0].vocab_size,
                           " and ", inputs[i].vocab_size));
        }
      }
      out = inputs.size() == 1
                ? Shape{p.dim()}
                : Shape{static_cast<int64_t>(inputs.size()), p.dim()};
      break;
    }
    case LayerDef::kDotInteraction: {
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
        width += NumElements(shape_of(0));
      }
      out = {width};
      break;
    }
    case LayerDef::kFmOrder2: {
      auto vectors = FeatureVectors(layer, inputs);
      if (!vectors.ok()) return vectors.status();
      out = {vectors->second};
      break;
    }
    case LayerDef::kCross: {
      const CrossLayer& p = layer.cross();
      if (absl::Status s = NeedVector(layer, 0, shape_of(0)); !s.ok()) {
        return s;
      }
      if (p.num_layers() < 1 || p.num_layers() > 64) {
        return LayerError(layer, absl::StrCat("num_layers must be in [1, 64], "
                                              "got ",
                                              p.num_layers()));
      }
      if (p.projection_dim() < 0 ||
          (p.version() == CrossLayer::V1 && p.projection_dim() != 0)) {
        return LayerError(layer,
                          absl::StrCat("projection_dim must be >= 0 (and 0 "
                                       "for version V1), got ",
                                       p.projection_dim()));
      }
      out = shape_of(0);
      break;
    }
  }
  if (absl::Status s = CheckSize(layer, out); !s.ok()) return s;
  return out;
}

std::vector<LayerVariable> LayerVariables(
    const LayerDef& layer, absl::Span<const TensorFacts> inputs) {
  using Seeds = LayerVariable::SeedClass;
  std::vector<LayerVariable> vars;
  const std::string& name = layer.name();
  switch (layer.kind_case()) {
    case LayerDef::kDense: {
      const DenseLayer& p = layer.dense();
      int64_t fan_in = 0;
      for (const TensorFacts& in : inputs) fan_in += in.shape[0];
      vars.push_back(Variable(absl::StrCat(name, "/kernel"),
                              {fan_in, p.units()}, p.kernel_initializer(),
                              Seeds::kDenseKernel));
      if (p.use_bias()) {
        vars.push_back(Variable(absl::StrCat(name, "/bias"), {p.units()},
                                p.bias_initializer(), Seeds::kOther));
      }
      break;
    }
    case LayerDef::kConv2D: {
      const Conv2DLayer& p = layer.conv2d();
      const int64_t channels = inputs[0].shape[2];
      vars.push_back(
          Variable(absl::StrCat(name, "/kernel"),
                   {p.kernel_size(0), p.kernel_size(1), channels, p.filters()},
                   p.kernel_initializer(), Seeds::kOther));
      if (p.use_bias()) {
        vars.push_back(Variable(absl::StrCat(name, "/bias"), {p.filters()},
                                p.bias_initializer(), Seeds::kOther));
      }
      break;
    }
    case LayerDef::kBatchNorm: {
      const int64_t c = inputs[0].shape.back();
      vars.push_back(Variable(absl::StrCat(name, "/gamma"), {c},
                              Kind(Initializer::ONES), Seeds::kOther));
      vars.push_back(Variable(absl::StrCat(name, "/beta"), {c},
                              Kind(Initializer::ZEROS), Seeds::kOther));
      OptimizerConfig moving;
      moving.mutable_moving_average()->set_momentum(
          layer.batch_norm().momentum());
      LayerVariable mean = Variable(absl::StrCat(name, "/moving_mean"), {c},
                                    Kind(Initializer::ZEROS), Seeds::kOther);
      mean.update_rule = moving;
      LayerVariable var = Variable(absl::StrCat(name, "/moving_variance"), {c},
                                   Kind(Initializer::ONES), Seeds::kOther);
      var.update_rule = moving;
      vars.push_back(std::move(mean));
      vars.push_back(std::move(var));
      break;
    }
    case LayerDef::kLayerNorm: {
      const int64_t c = inputs[0].shape.back();
      vars.push_back(Variable(absl::StrCat(name, "/gamma"), {c},
                              Kind(Initializer::ONES), Seeds::kOther));
      vars.push_back(Variable(absl::StrCat(name, "/beta"), {c},
                              Kind(Initializer::ZEROS), Seeds::kOther));
      break;
    }
    case LayerDef::kEmbeddingBag: {
      const EmbeddingBagLayer& p = layer.embedding_bag();
      LayerVariable table = Variable(p.table(), {inputs[0].vocab_size, p.dim()},
                                     p.initializer(), Seeds::kTable);
      table.sparse = true;
      vars.push_back(std::move(table));
      break;
    }
    case LayerDef::kCross: {
      const CrossLayer& p = layer.cross();
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
                                Kind(Initializer::ZEROS), Seeds::kOther));
      }
      break;
    }
    default:
      break;
  }
  return vars;
}

}  // namespace tessera
