// Layers over images [h, w, c]: conv2d and max_pool2d.
#include "absl/strings/str_cat.h"
#include "common/model/layer_kind.h"

namespace tessera {
namespace {

void Conv2DDefaults(LayerDef* layer) {
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
    *p->mutable_bias_initializer() = InitializerOfKind(Initializer::ZEROS);
  }
}

absl::StatusOr<Shape> Conv2DShape(const LayerDef& layer,
                                  absl::Span<const TensorFacts> inputs) {
  const Conv2DLayer& p = layer.conv2d();
  const Shape& in = inputs[0].shape;
  if (absl::Status s = NeedImage(layer, in); !s.ok()) return s;
  if (p.filters() < 1) {
    return LayerError(layer,
                      absl::StrCat("filters must be >= 1, got ", p.filters()));
  }
  if (p.kernel_size_size() == 0) {
    return LayerError(layer, "needs kernel_size");
  }
  auto kernel = Pair(layer, "kernel_size", p.kernel_size(), {0, 0});
  if (!kernel.ok()) return kernel.status();
  auto strides = Pair(layer, "strides", p.strides(), {1, 1});
  if (!strides.ok()) return strides.status();
  return Window(layer, in, *kernel, *strides, p.padding(), p.filters());
}

std::vector<LayerVariable> Conv2DVariables(
    const LayerDef& layer, absl::Span<const TensorFacts> inputs) {
  using Seeds = LayerVariable::SeedClass;
  const Conv2DLayer& p = layer.conv2d();
  const std::string& name = layer.name();
  std::vector<LayerVariable> vars;
  const int64_t channels = inputs[0].shape[2];
  vars.push_back(
      Variable(absl::StrCat(name, "/kernel"),
               {p.kernel_size(0), p.kernel_size(1), channels, p.filters()},
               p.kernel_initializer(), Seeds::kOther));
  if (p.use_bias()) {
    vars.push_back(Variable(absl::StrCat(name, "/bias"), {p.filters()},
                            p.bias_initializer(), Seeds::kOther));
  }
  return vars;
}

void MaxPool2DDefaults(LayerDef* layer) {
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
}

absl::StatusOr<Shape> MaxPool2DShape(const LayerDef& layer,
                                     absl::Span<const TensorFacts> inputs) {
  const MaxPool2DLayer& p = layer.max_pool2d();
  const Shape& in = inputs[0].shape;
  if (absl::Status s = NeedImage(layer, in); !s.ok()) return s;
  auto pool = Pair(layer, "pool_size", p.pool_size(), {2, 2});
  if (!pool.ok()) return pool.status();
  auto strides = Pair(layer, "strides", p.strides(), *pool);
  if (!strides.ok()) return strides.status();
  return Window(layer, in, *pool, *strides, p.padding(), in[2]);
}

}  // namespace

extern const LayerKind kConv2DLayerKind = {
    LayerDef::kConv2D, "conv2d",    false,          1, 1,
    Conv2DDefaults,    Conv2DShape, Conv2DVariables};

extern const LayerKind kMaxPool2DLayerKind = {
    LayerDef::kMaxPool2D, "max_pool2d",   false,  1, 1,
    MaxPool2DDefaults,    MaxPool2DShape, nullptr};

}  // namespace tessera
