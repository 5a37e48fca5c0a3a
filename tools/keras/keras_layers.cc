#include "tools/keras/keras_layers.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tools/keras/keras_config.h"

namespace tessera {
namespace keras {
namespace {

size_t WeightsOfLayer(const std::vector<WeightRef>& weights,
                      const std::string& layer) {
  size_t count = 0;
  for (const WeightRef& w : weights) count += w.layer == layer;
  return count;
}

std::string WhyNot(const std::string& cls) {
  static const std::set<std::string> kRecurrent = {
      "LSTM",          "GRU",        "SimpleRNN", "RNN",
      "Bidirectional", "ConvLSTM2D", "LSTMCell",  "GRUCell"};
  if (kRecurrent.count(cls) != 0) {
    return "Tessera has no recurrent layers";
  }
  if (absl::StrContains(cls, "Attention")) {
    return "Tessera has no attention layers";
  }
  if (cls == "Lambda") {
    return "a Lambda layer is Python code, which the config does not hold";
  }
  return "not a layer Tessera has (it has InputLayer, Dense, Activation, "
         "ReLU, Softmax, Dropout, BatchNormalization, LayerNormalization, "
         "Conv2D, MaxPooling2D, Flatten, Reshape, Concatenate, Add, "
         "Multiply, and Embedding pooled by GlobalAveragePooling1D or "
         "Flatten)";
}

absl::Status RequireDefaultInitializers(const KerasNode& n) {
  const std::pair<const char*, Initializer::Kind> defaults[] = {
      {"beta_initializer", Initializer::ZEROS},
      {"gamma_initializer", Initializer::ONES},
      {"moving_mean_initializer", Initializer::ZEROS},
      {"moving_variance_initializer", Initializer::ONES}};
  for (const auto& [field, kind] : defaults) {
    absl::StatusOr<std::optional<Initializer>> init =
        ParseInitializer(n, field, Kind(kind));
    if (!init.ok()) return init.status();
    if (init->has_value()) {
      return Refuse(
          n, absl::StrCat(field, ": Tessera's is ",
                          kind == Initializer::ZEROS ? "zeros" : "ones"));
    }
  }
  return absl::OkStatus();
}
// Each translator below checks Keras layer `n`'s options and fills `layer`;
// the caller has already checked how many tensors it reads.
using Translator = absl::Status (*)(const KerasNode& n,
                                    absl::Span<const TensorFacts> inputs,
                                    LayerDef* layer,
                                    std::vector<WeightRef>* weights);

// Dense and Conv2D keep their bias, kernel and bias initializers alike.
template <typename Proto>
absl::Status TranslateKernelAndBias(const KerasNode& n, Proto* p,
                                    std::vector<WeightRef>* weights) {
  const bool bias = n.config.value("use_bias", true);
  if (!bias) p->set_use_bias(false);
  absl::StatusOr<std::optional<Initializer>> k = ParseInitializer(
      n, "kernel_initializer", Kind(Initializer::GLOROT_UNIFORM));
  if (!k.ok()) return k.status();
  if (k->has_value()) *p->mutable_kernel_initializer() = **k;
  absl::StatusOr<std::optional<Initializer>> b =
      ParseInitializer(n, "bias_initializer", Kind(Initializer::ZEROS));
  if (!b.ok()) return b.status();
  if (b->has_value()) *p->mutable_bias_initializer() = **b;
  weights->push_back({n.name, 0, n.name + "/kernel"});
  if (bias) weights->push_back({n.name, 1, n.name + "/bias"});
  return absl::OkStatus();
}

absl::Status TranslateDense(const KerasNode& n,
                            absl::Span<const TensorFacts> inputs,
                            LayerDef* layer, std::vector<WeightRef>* weights) {
  const json& c = n.config;
  if (absl::Status s = RequireNull(
          n, {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
              "kernel_constraint", "bias_constraint", "lora_rank",
              "quantization_config"});
      !s.ok()) {
    return s;
  }
  DenseLayer* d = layer->mutable_dense();
  d->set_units(c.value("units", int64_t{0}));
  absl::StatusOr<Activation> a =
      ParseActivation(n, c.value("activation", json()));
  if (!a.ok()) return a.status();
  d->set_activation(*a);
  return TranslateKernelAndBias(n, d, weights);
}

absl::Status TranslateConv2D(const KerasNode& n,
                             absl::Span<const TensorFacts> inputs,
                             LayerDef* layer, std::vector<WeightRef>* weights) {
  const json& c = n.config;
  if (absl::Status s = RequireChannelsLast(n); !s.ok()) return s;
  if (absl::Status s = RequireNull(
          n, {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
              "kernel_constraint", "bias_constraint", "lora_rank"});
      !s.ok()) {
    return s;
  }
  for (int64_t r : Ints(c.value("dilation_rate", json(1)))) {
    if (r != 1) return Refuse(n, "dilation_rate: Tessera's Conv2D has none");
  }
  if (c.value("groups", 1) != 1) {
    return Refuse(n, "groups > 1: Tessera's Conv2D has one group");
  }
  Conv2DLayer* p = layer->mutable_conv2d();
  p->set_filters(c.value("filters", int64_t{0}));
  for (int64_t k : Ints(c.value("kernel_size", json()))) p->add_kernel_size(k);
  std::vector<int64_t> strides = Ints(c.value("strides", json(1)));
  if (strides.size() == 1) strides.push_back(strides[0]);
  if (strides != std::vector<int64_t>{1, 1}) {
    for (int64_t s : strides) p->add_strides(s);
  }
  absl::StatusOr<Padding> pad = ParsePadding(n);
  if (!pad.ok()) return pad.status();
  p->set_padding(*pad);
  absl::StatusOr<Activation> a =
      ParseActivation(n, c.value("activation", json()));
  if (!a.ok()) return a.status();
  p->set_activation(*a);
  return TranslateKernelAndBias(n, p, weights);
}

absl::Status TranslateMaxPooling2D(const KerasNode& n,
                                   absl::Span<const TensorFacts> inputs,
                                   LayerDef* layer,
                                   std::vector<WeightRef>* weights) {
  const json& c = n.config;
  if (absl::Status s = RequireChannelsLast(n); !s.ok()) return s;
  MaxPool2DLayer* p = layer->mutable_max_pool2d();
  std::vector<int64_t> pool = Ints(c.value("pool_size", json(2)));
  if (pool.size() == 1) pool.push_back(pool[0]);
  std::vector<int64_t> strides =
      IsNull(c, "strides") ? pool : Ints(c["strides"]);
  if (strides.size() == 1) strides.push_back(strides[0]);
  // Fields at Tessera's defaults stay unset, so the model file says only
  // what differs.
  if (pool != std::vector<int64_t>{2, 2}) {
    for (int64_t v : pool) p->add_pool_size(v);
  }
  if (strides != pool) {
    for (int64_t v : strides) p->add_strides(v);
  }
  absl::StatusOr<Padding> pad = ParsePadding(n);
  if (!pad.ok()) return pad.status();
  p->set_padding(*pad);
  return absl::OkStatus();
}

// Activation, ReLU and Softmax all become Tessera's activation layer.
absl::Status TranslateActivation(const KerasNode& n,
                                 absl::Span<const TensorFacts> inputs,
                                 LayerDef* layer,
                                 std::vector<WeightRef>* weights) {
  const json& c = n.config;
  const std::string& cls = n.class_name;
  Activation a = RELU;
  if (cls == "Activation") {
    absl::StatusOr<Activation> parsed =
        ParseActivation(n, c.value("activation", json()));
    if (!parsed.ok()) return parsed.status();
    a = *parsed;
  } else if (cls == "ReLU") {
    if (!IsNull(c, "max_value") || c.value("negative_slope", 0.0) != 0 ||
        c.value("threshold", 0.0) != 0) {
      return Refuse(n,
                    "max_value, negative_slope or threshold: Tessera's "
                    "relu is max(x, 0)");
    }
  } else {
    if (!IsLastAxis(c.value("axis", json(-1)), inputs[0].shape.size() + 1)) {
      return Refuse(n, "axis: Tessera's softmax is over the last axis");
    }
    a = SOFTMAX;
  }
  layer->mutable_activation()->set_activation(a);
  return absl::OkStatus();
}

absl::Status TranslateDropout(const KerasNode& n,
                              absl::Span<const TensorFacts> inputs,
                              LayerDef* layer,
                              std::vector<WeightRef>* weights) {
  const json& c = n.config;
  if (!IsNull(c, "noise_shape")) {
    return Refuse(n, "noise_shape: Tessera drops elements independently");
  }
  layer->mutable_dropout()->set_rate(Float(c, "rate", 0));
  return absl::OkStatus();
}

absl::Status TranslateBatchNormalization(const KerasNode& n,
                                         absl::Span<const TensorFacts> inputs,
                                         LayerDef* layer,
                                         std::vector<WeightRef>* weights) {
  const json& c = n.config;
  if (!IsLastAxis(c.value("axis", json(-1)), inputs[0].shape.size() + 1)) {
    return Refuse(n, absl::StrCat("axis ", c.value("axis", json(-1)).dump(),
                                  ": Tessera normalises the last axis "
                                  "(-1)"));
  }
  if (!c.value("center", true) || !c.value("scale", true) ||
      c.value("renorm", false)) {
    return Refuse(n,
                  "center, scale or renorm off the defaults: Tessera's "
                  "BatchNormalization has beta and gamma, no renorm");
  }
  if (absl::Status s = RequireDefaultInitializers(n); !s.ok()) return s;
  BatchNormLayer* p = layer->mutable_batch_norm();
  p->set_momentum(Float(c, "momentum", 0.99f));
  p->set_epsilon(Float(c, "epsilon", 1e-3f));
  for (const char* v : {"gamma", "beta", "moving_mean", "moving_variance"}) {
    weights->push_back({n.name,
                        static_cast<int>(WeightsOfLayer(*weights, n.name)),
                        absl::StrCat(n.name, "/", v)});
  }
  return absl::OkStatus();
}

absl::Status TranslateLayerNormalization(const KerasNode& n,
                                         absl::Span<const TensorFacts> inputs,
                                         LayerDef* layer,
                                         std::vector<WeightRef>* weights) {
  const json& c = n.config;
  if (!IsLastAxis(c.value("axis", json(-1)), inputs[0].shape.size() + 1)) {
    return Refuse(n, "axis: Tessera normalises the last axis (-1)");
  }
  if (!c.value("center", true) || !c.value("scale", true) ||
      c.value("rms_scaling", false)) {
    return Refuse(n,
                  "center, scale or rms_scaling off the defaults: "
                  "Tessera's LayerNormalization has beta and gamma");
  }
  if (absl::Status s = RequireDefaultInitializers(n); !s.ok()) return s;
  layer->mutable_layer_norm()->set_epsilon(Float(c, "epsilon", 1e-3f));
  weights->push_back({n.name, 0, n.name + "/gamma"});
  weights->push_back({n.name, 1, n.name + "/beta"});
  return absl::OkStatus();
}

absl::Status TranslateFlatten(const KerasNode& n,
                              absl::Span<const TensorFacts> inputs,
                              LayerDef* layer,
                              std::vector<WeightRef>* weights) {
  if (absl::Status s = RequireChannelsLast(n); !s.ok()) return s;
  layer->mutable_flatten();
  return absl::OkStatus();
}

absl::Status TranslateReshape(const KerasNode& n,
                              absl::Span<const TensorFacts> inputs,
                              LayerDef* layer,
                              std::vector<WeightRef>* weights) {
  for (int64_t d : Ints(n.config.value("target_shape", json()))) {
    layer->mutable_reshape()->add_shape(d);
  }
  return absl::OkStatus();
}

absl::Status TranslateConcatenate(const KerasNode& n,
                                  absl::Span<const TensorFacts> inputs,
                                  LayerDef* layer,
                                  std::vector<WeightRef>* weights) {
  int axis = n.config.value("axis", -1);
  // Keras counts the batch axis; Tessera's shapes are per example.
  if (axis == 0) return Refuse(n, "axis 0 is the batch");
  ConcatLayer* p = layer->mutable_concat();
  if (axis > 0) axis -= 1;
  if (axis != -1) p->set_axis(axis);
  return absl::OkStatus();
}

absl::Status TranslateAdd(const KerasNode& n,
                          absl::Span<const TensorFacts> inputs, LayerDef* layer,
                          std::vector<WeightRef>* weights) {
  layer->mutable_add();
  return absl::OkStatus();
}

absl::Status TranslateMultiply(const KerasNode& n,
                               absl::Span<const TensorFacts> inputs,
                               LayerDef* layer,
                               std::vector<WeightRef>* weights) {
  layer->mutable_multiply();
  return absl::OkStatus();
}

// The importer pools an Embedding's output itself; reaching here means the
// pooling reads some other tensor.
absl::Status TranslateGlobalAveragePooling1D(
    const KerasNode& n, absl::Span<const TensorFacts> inputs, LayerDef* layer,
    std::vector<WeightRef>* weights) {
  return Refuse(n,
                "pools a tensor that is not an Embedding's: Tessera "
                "averages embeddings of ids only");
}

struct LayerKind {
  Translator translate;
  // The merging layers read any number of tensors; the rest read one.
  bool one_input;
};

const LayerKind* FindLayerKind(const std::string& cls) {
  static const auto* const kKinds = new std::map<std::string, LayerKind>{
      {"Dense", {TranslateDense, true}},
      {"Conv2D", {TranslateConv2D, true}},
      {"MaxPooling2D", {TranslateMaxPooling2D, true}},
      {"Activation", {TranslateActivation, true}},
      {"ReLU", {TranslateActivation, true}},
      {"Softmax", {TranslateActivation, true}},
      {"Dropout", {TranslateDropout, true}},
      {"BatchNormalization", {TranslateBatchNormalization, true}},
      {"LayerNormalization", {TranslateLayerNormalization, true}},
      {"Flatten", {TranslateFlatten, true}},
      {"Reshape", {TranslateReshape, true}},
      {"Concatenate", {TranslateConcatenate, false}},
      {"Add", {TranslateAdd, false}},
      {"Multiply", {TranslateMultiply, false}},
      {"GlobalAveragePooling1D", {TranslateGlobalAveragePooling1D, false}},
  };
  auto it = kKinds->find(cls);
  return it == kKinds->end() ? nullptr : &it->second;
}

}  // namespace

absl::Status TranslateKerasLayer(const KerasNode& n,
                                 absl::Span<const TensorFacts> inputs,
                                 LayerDef* layer,
                                 std::vector<WeightRef>* weights) {
  const LayerKind* kind = FindLayerKind(n.class_name);
  if (kind == nullptr) return Refuse(n, WhyNot(n.class_name));
  if (kind->one_input && inputs.size() != 1) {
    return Refuse(
        n, absl::StrCat("reads ", inputs.size(), " tensors; it takes one"));
  }
  return kind->translate(n, inputs, layer, weights);
}

}  // namespace keras
}  // namespace tessera
