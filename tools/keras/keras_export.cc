#include "tools/keras/keras_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/model/layer_kinds.h"
#include "common/optimizer/keras_defaults.h"
#include "tools/keras/keras_graph.h"

namespace tessera {
namespace {

using json = nlohmann::json;

// The shortest decimal that reads back as `f`, as a double: a float the
// user gave as 0.9 is written 0.9, not 0.8999999761581421 (its exact
// value), and reads back as the same float.
double Decimal(float f) {
  if (!std::isfinite(f)) return f;
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, static_cast<double>(f));
    if (std::strtof(text, nullptr) == f) break;
  }
  return std::strtod(text, nullptr);
}

json Policy() {
  return {{"module", "keras"},
          {"class_name", "DTypePolicy"},
          {"config", {{"name", "float32"}}},
          {"registered_name", nullptr}};
}

json Object(const std::string& module, const std::string& cls, json config) {
  return {{"module", module},
          {"class_name", cls},
          {"config", std::move(config)},
          {"registered_name", nullptr}};
}

json InitializerJson(const Initializer& init) {
  const std::string m = "keras.initializers";
  switch (init.kind()) {
    case Initializer::GLOROT_UNIFORM:
      return Object(m, "GlorotUniform", {{"seed", nullptr}});
    case Initializer::ONES:
      return Object(m, "Ones", json::object());
    case Initializer::CONSTANT:
      return Object(m, "Constant", {{"value", Decimal(init.value())}});
    case Initializer::UNIFORM:
      return Object(m, "RandomUniform",
                    {{"minval", Decimal(init.minval())},
                     {"maxval", Decimal(init.maxval())},
                     {"seed", nullptr}});
    case Initializer::NORMAL:
      return Object(m, "RandomNormal",
                    {{"mean", 0.0},
                     {"stddev", Decimal(init.stddev())},
                     {"seed", nullptr}});
    default:
      return Object(m, "Zeros", json::object());
  }
}

std::string ActivationName(Activation a) {
  switch (a) {
    case RELU:
      return "relu";
    case SIGMOID:
      return "sigmoid";
    case TANH:
      return "tanh";
    case SOFTMAX:
      return "softmax";
    default:
      return "linear";
  }
}

json PaddingName(Padding p) { return p == SAME ? "same" : "valid"; }

// Keras' schedule for opt's learning_rate and schedule (proto/job.proto's
// LearningRateSchedule names the mapping): a number without a schedule;
// Unimplemented for what no Keras schedule does (a hold, or a warm-up
// outside CosineDecay).
absl::StatusOr<json> LearningRateJson(const OptimizerConfig& opt) {
  const std::string m = "keras.optimizers.schedules";
  if (!opt.has_schedule()) return json(Decimal(opt.learning_rate()));
  const LearningRateSchedule& s = opt.schedule();
  const auto refuse = [](absl::string_view why) {
    return absl::UnimplementedError(
        absl::StrCat("optimizer schedule: ", why,
                     "; Keras' schedules have "
                     "no such rate, so the model cannot be exported"));
  };
  if (s.hold_steps() > 0) return refuse("hold_steps > 0");
  if (s.warmup_steps() > 0 && s.decay() != LearningRateSchedule::DECAY_COSINE) {
    return refuse("a warm-up before a decay other than cosine");
  }
  switch (s.decay()) {
    case LearningRateSchedule::DECAY_CONSTANT:
      if (s.warmup_steps() > 0) return refuse("a warm-up to a constant rate");
      return json(Decimal(opt.learning_rate()));
    case LearningRateSchedule::DECAY_EXPONENTIAL:
      return Object(m, "ExponentialDecay",
                    {{"initial_learning_rate", Decimal(opt.learning_rate())},
                     {"decay_steps", s.decay_steps()},
                     {"decay_rate", Decimal(s.decay_rate())},
                     {"staircase", s.staircase()},
                     {"name", "ExponentialDecay"}});
    case LearningRateSchedule::DECAY_PIECEWISE: {
      json values = json::array();
      for (float v : s.values()) values.push_back(Decimal(v));
      return Object(m, "PiecewiseConstantDecay",
                    {{"boundaries", s.boundaries()},
                     {"values", values},
                     {"name", "PiecewiseConstant"}});
    }
    case LearningRateSchedule::DECAY_COSINE: {
      const bool warmup = s.warmup_steps() > 0;
      return Object(m, "CosineDecay",
                    {{"initial_learning_rate",
                      Decimal(warmup ? s.warmup_initial_learning_rate()
                                     : opt.learning_rate())},
                     {"decay_steps", s.decay_steps()},
                     {"alpha", Decimal(s.alpha())},
                     {"name", "CosineDecay"},
                     {"warmup_target",
                      warmup ? json(Decimal(opt.learning_rate())) : json()},
                     {"warmup_steps", s.warmup_steps()}});
    }
    case LearningRateSchedule::DECAY_POLYNOMIAL:
      return Object(m, "PolynomialDecay",
                    {{"initial_learning_rate", Decimal(opt.learning_rate())},
                     {"decay_steps", s.decay_steps()},
                     {"end_learning_rate", Decimal(s.end_learning_rate())},
                     {"power", Decimal(s.has_power() ? s.power() : 1.0f)},
                     {"cycle", s.cycle()},
                     {"name", "PolynomialDecay"}});
    default:
      return refuse(absl::StrCat("decay ", s.decay()));
  }
}

absl::StatusOr<json> OptimizerJson(const OptimizerConfig& opt) {
  const std::string m = "keras.optimizers";
  absl::StatusOr<json> rate = LearningRateJson(opt);
  if (!rate.ok()) return rate.status();
  const GradientClipping& clip = opt.clipping();
  const auto clip_json = [](float v) {
    return v > 0 ? json(Decimal(v)) : json();
  };
  json c = {
      {"learning_rate", *rate},
      {"weight_decay",
       opt.weight_decay() > 0 ? json(Decimal(opt.weight_decay())) : json()},
      {"clipnorm", clip_json(clip.norm())},
      {"global_clipnorm", clip_json(clip.global_norm())},
      {"clipvalue", clip_json(clip.value())}};
  switch (opt.kind_case()) {
    case OptimizerConfig::kAdam:
      c["beta_1"] = Decimal(opt.adam().beta1());
      c["beta_2"] = Decimal(opt.adam().beta2());
      c["epsilon"] = Decimal(opt.adam().epsilon());
      c["amsgrad"] = false;
      // Adam with decoupled weight decay is Keras' AdamW.
      if (opt.weight_decay() > 0) {
        c["name"] = "adamw";
        return Object(m, "AdamW", c);
      }
      c["name"] = "adam";
      return Object(m, "Adam", c);
    case OptimizerConfig::kMomentum:
      c["name"] = "sgd";
      c["momentum"] = Decimal(opt.momentum().momentum());
      c["nesterov"] = opt.momentum().nesterov();
      return Object(m, "SGD", c);
    case OptimizerConfig::kAdagrad:
      c["name"] = "adagrad";
      c["initial_accumulator_value"] =
          Decimal(AdagradInitialAccumulator(opt.adagrad()));
      c["epsilon"] = Decimal(AdagradEpsilon(opt.adagrad()));
      return Object(m, "Adagrad", c);
    case OptimizerConfig::kFtrl: {
      const FtrlOptions& f = opt.ftrl();
      c["name"] = "ftrl";
      c["learning_rate_power"] = Decimal(FtrlLearningRatePower(f));
      c["initial_accumulator_value"] = Decimal(FtrlInitialAccumulator(f));
      c["l1_regularization_strength"] = Decimal(f.l1());
      c["l2_regularization_strength"] = Decimal(f.l2());
      c["l2_shrinkage_regularization_strength"] = Decimal(f.l2_shrinkage());
      c["beta"] = Decimal(f.beta());
      return Object(m, "Ftrl", c);
    }
    case OptimizerConfig::kSgd:
    case OptimizerConfig::KIND_NOT_SET:
      c["name"] = "sgd";
      c["momentum"] = 0.0;
      c["nesterov"] = false;
      return Object(m, "SGD", c);
    default:
      return absl::UnimplementedError(
          "optimizer: Keras has no optimizer of this kind (row-wise "
          "Adagrad), so the model cannot be exported");
  }
}

class Exporter {
 public:
  explicit Exporter(const TrainedModel& m) : m_(m), g_(m.graph.resolved) {}

  absl::StatusOr<KerasExport> Run() {
    for (const InputDef& in : g_.inputs()) AddInput(in);
    // The tensors layers read, to tell whether a loss's logits feed more.
    for (const LayerDef& l : g_.layers()) {
      for (const std::string& in : l.inputs()) ++readers_[in];
    }
    const LossDef& loss = g_.loss();
    // A model that output logits (from_logits) goes back without the
    // loss's activation: Keras' predict then gives what the original's did.
    if (!loss.from_logits()) {
      if (loss.kind() == LossDef::SOFTMAX_CROSS_ENTROPY) fused_ = SOFTMAX;
      if (loss.kind() == LossDef::SIGMOID_CROSS_ENTROPY) fused_ = SIGMOID;
    }
    for (int i : m_.graph.order) {
      if (absl::Status s = AddLayer(g_.layers(i)); !s.ok()) return s;
    }
    std::string output = keras_of_[loss.input()];
    if (fused_ != LINEAR && !activated_) {
      // The logits come from a layer without an activation of its own.
      output = Layer(
          "Activation", absl::StrCat(loss.input(), "_", ActivationName(fused_)),
          {{"activation", ActivationName(fused_)}}, {output}, loss.input());
    }
    std::vector<std::string> outputs = {output};
    for (const std::string& t : g_.outputs()) {
      if (t != loss.input()) outputs.push_back(keras_of_[t]);
    }
    return Finish(outputs);
  }

 private:
  void AddInput(const InputDef& in) {
    json batch = json::array({nullptr});
    Shape shape;
    if (in.has_sparse()) {
      shape = {std::max(1, in.sparse().max_hotness())};
    } else {
      shape.assign(in.dense().shape().begin(), in.dense().shape().end());
    }
    for (int64_t d : shape) batch.push_back(d);
    json config = {{"batch_shape", batch},
                   {"dtype", in.has_sparse() ? "int32" : "float32"},
                   {"sparse", false},
                   {"ragged", false},
                   {"name", in.name()},
                   {"optional", false}};
    layers_.push_back({{"module", "keras.layers"},
                       {"class_name", "InputLayer"},
                       {"config", config},
                       {"registered_name", nullptr},
                       {"name", in.name()},
                       {"inbound_nodes", json::array()}});
    KerasNode node;
    node.name = in.name();
    node.class_name = "InputLayer";
    graph_.layers.push_back(node);
    graph_.inputs.push_back(in.name());
    keras_of_[in.name()] = in.name();
    shape_of_[in.name()] = shape;
    dtype_of_[in.name()] = in.has_sparse() ? "int32" : "float32";
  }

  json TensorJson(const std::string& keras_name) {
    json shape = json::array({nullptr});
    for (int64_t d : shape_of_[keras_name]) shape.push_back(d);
    return {{"class_name", "__keras_tensor__"},
            {"config",
             {{"shape", shape},
              {"dtype", dtype_of_.contains(keras_name) ? dtype_of_[keras_name]
                                                       : "float32"},
              {"keras_history", {keras_name, 0, 0}}}}};
  }

  // Adds Keras layer `name` of class `cls` reading Keras layers `inputs`;
  // it computes Tessera tensor `tensor` (whose shape it takes). Returns
  // its name.
  std::string Layer(const std::string& cls, const std::string& name,
                    json config, const std::vector<std::string>& inputs,
                    const std::string& tensor,
                    std::vector<std::string> variables = {}) {
    config["name"] = name;
    config["trainable"] = true;
    config["dtype"] = Policy();
    json args = json::array();
    if (inputs.size() == 1) {
      args.push_back(TensorJson(inputs[0]));
    } else {
      json list = json::array();
      for (const std::string& in : inputs) list.push_back(TensorJson(in));
      args.push_back(list);
    }
    layers_.push_back(
        {{"module", "keras.layers"},
         {"class_name", cls},
         {"config", config},
         {"registered_name", nullptr},
         {"name", name},
         {"inbound_nodes",
          json::array({{{"args", args}, {"kwargs", json::object()}}})}});
    KerasNode node;
    node.name = name;
    node.class_name = cls;
    node.inputs = inputs;
    graph_.layers.push_back(node);
    variables_[name] = std::move(variables);
    auto it = m_.graph.tensors.find(tensor);
    if (it != m_.graph.tensors.end()) shape_of_[name] = it->second.shape;
    return name;
  }

  absl::Status Unsupported(const LayerDef& l, absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "layer \"", l.name(), "\" (", LayerKindName(l), "): ", why));
  }

  // The activation a layer writing `tensor` gets: its own, or the fused
  // loss's when it writes the loss's logits and has none (and nothing
  // else reads them).
  std::string ActivationFor(Activation own, const std::string& tensor) {
    if (fused_ != LINEAR && tensor == g_.loss().input() && own == LINEAR &&
        readers_[tensor] == 0) {
      activated_ = true;
      return ActivationName(fused_);
    }
    return ActivationName(own);
  }

  absl::Status AddLayer(const LayerDef& l) {
    const std::string out = l.output().empty() ? l.name() : l.output();
    std::vector<std::string> ins;
    for (const std::string& in : l.inputs()) ins.push_back(keras_of_[in]);
    absl::StatusOr<std::string> made = ExportLayer(l, std::move(ins), out);
    if (!made.ok()) return made.status();
    keras_of_[out] = *made;
    return absl::OkStatus();
  }

  // Adds the Keras layers for Tessera layer `l`, which reads Keras layers
  // `ins` and writes tensor `out`; returns the Keras layer writing `out`.
  absl::StatusOr<std::string> ExportLayer(const LayerDef& l,
                                          std::vector<std::string> ins,
                                          const std::string& out) {
    switch (l.kind_case()) {
      case LayerDef::kDense:
        return ExportDense(l, std::move(ins), out);
      case LayerDef::kConv2D:
        return ExportConv2D(l, ins, out);
      case LayerDef::kMaxPool2D:
        return ExportMaxPool2D(l, ins, out);
      case LayerDef::kActivation:
        return Layer(
            "Activation", l.name(),
            {{"activation", ActivationFor(l.activation().activation(), out)}},
            ins, out);
      case LayerDef::kDropout:
        return Layer("Dropout", l.name(),
                     {{"rate", Decimal(l.dropout().rate())},
                      {"noise_shape", nullptr},
                      {"seed", nullptr}},
                     ins, out);
      case LayerDef::kBatchNorm:
        return ExportBatchNorm(l, ins, out);
      case LayerDef::kLayerNorm:
        return Layer("LayerNormalization", l.name(),
                     {{"axis", -1},
                      {"epsilon", Decimal(l.layer_norm().epsilon())},
                      {"center", true},
                      {"scale", true}},
                     ins, out, {l.name() + "/gamma", l.name() + "/beta"});
      case LayerDef::kFlatten:
        return Layer("Flatten", l.name(), {{"data_format", "channels_last"}},
                     ins, out);
      case LayerDef::kReshape: {
        json shape = json::array();
        for (int64_t d : l.reshape().shape()) shape.push_back(d);
        return Layer("Reshape", l.name(), {{"target_shape", shape}}, ins, out);
      }
      case LayerDef::kConcat: {
        // Keras counts the batch axis; Tessera's shapes are per example.
        int axis = l.concat().axis();
        return Layer("Concatenate", l.name(),
                     {{"axis", axis >= 0 ? axis + 1 : axis}}, ins, out);
      }
      case LayerDef::kAdd:
        return Layer("Add", l.name(), json::object(), ins, out);
      case LayerDef::kMultiply:
        return Layer("Multiply", l.name(), json::object(), ins, out);
      case LayerDef::kEmbeddingBag:
        return AddEmbeddingBag(l, ins, out);
      case LayerDef::kDotInteraction:
      case LayerDef::kCross:
      case LayerDef::kFmOrder2:
        return Unsupported(l,
                           "Keras has no such layer without custom "
                           "objects (keras_rs holds DotInteraction and "
                           "FeatureCross as custom ones)");
      default:
        return Unsupported(l, "not a layer kind the Keras export knows");
    }
  }

  std::string ExportDense(const LayerDef& l, std::vector<std::string> ins,
                          const std::string& out) {
    const DenseLayer& p = l.dense();
    if (ins.size() > 1) {
      // Tessera's Dense reads several inputs as their concatenation.
      ins = {
          Layer("Concatenate", l.name() + "_concat", {{"axis", -1}}, ins, "")};
      int64_t width = 0;
      for (const std::string& in : l.inputs()) {
        width += m_.graph.tensors.at(in).shape.back();
      }
      shape_of_[ins[0]] = {width};
    }
    std::vector<std::string> vars = {l.name() + "/kernel"};
    if (p.use_bias()) vars.push_back(l.name() + "/bias");
    return Layer(
        "Dense", l.name(),
        {{"units", p.units()},
         {"activation", ActivationFor(p.activation(), out)},
         {"use_bias", p.use_bias()},
         {"kernel_initializer", InitializerJson(p.kernel_initializer())},
         {"bias_initializer", InitializerJson(p.bias_initializer())},
         {"kernel_regularizer", nullptr},
         {"bias_regularizer", nullptr},
         {"kernel_constraint", nullptr},
         {"bias_constraint", nullptr}},
        ins, out, vars);
  }

  std::string ExportConv2D(const LayerDef& l,
                           const std::vector<std::string>& ins,
                           const std::string& out) {
    const Conv2DLayer& p = l.conv2d();
    std::vector<std::string> vars = {l.name() + "/kernel"};
    if (p.use_bias()) vars.push_back(l.name() + "/bias");
    json kernel = json::array();
    for (int64_t k : p.kernel_size()) kernel.push_back(k);
    if (kernel.size() == 1) kernel.push_back(kernel[0]);
    json strides = json::array();
    for (int64_t s : p.strides()) strides.push_back(s);
    if (strides.empty()) strides = {1, 1};
    if (strides.size() == 1) strides.push_back(strides[0]);
    return Layer(
        "Conv2D", l.name(),
        {{"filters", p.filters()},
         {"kernel_size", kernel},
         {"strides", strides},
         {"padding", PaddingName(p.padding())},
         {"data_format", "channels_last"},
         {"dilation_rate", {1, 1}},
         {"groups", 1},
         {"activation", ActivationFor(p.activation(), out)},
         {"use_bias", p.use_bias()},
         {"kernel_initializer", InitializerJson(p.kernel_initializer())},
         {"bias_initializer", InitializerJson(p.bias_initializer())}},
        ins, out, vars);
  }

  std::string ExportMaxPool2D(const LayerDef& l,
                              const std::vector<std::string>& ins,
                              const std::string& out) {
    const MaxPool2DLayer& p = l.max_pool2d();
    json pool = json::array(), strides = json::array();
    for (int64_t v : p.pool_size()) pool.push_back(v);
    if (pool.empty()) pool = {2, 2};
    if (pool.size() == 1) pool.push_back(pool[0]);
    for (int64_t v : p.strides()) strides.push_back(v);
    if (strides.empty()) strides = pool;
    if (strides.size() == 1) strides.push_back(strides[0]);
    return Layer("MaxPooling2D", l.name(),
                 {{"pool_size", pool},
                  {"padding", PaddingName(p.padding())},
                  {"strides", strides},
                  {"data_format", "channels_last"}},
                 ins, out);
  }

  std::string ExportBatchNorm(const LayerDef& l,
                              const std::vector<std::string>& ins,
                              const std::string& out) {
    return Layer("BatchNormalization", l.name(),
                 {{"axis", -1},
                  {"momentum", Decimal(l.batch_norm().momentum())},
                  {"epsilon", Decimal(l.batch_norm().epsilon())},
                  {"center", true},
                  {"scale", true}},
                 ins, out,
                 {l.name() + "/gamma", l.name() + "/beta",
                  l.name() + "/moving_mean", l.name() + "/moving_variance"});
  }

  absl::StatusOr<std::string> AddEmbeddingBag(
      const LayerDef& l, const std::vector<std::string>& ins,
      const std::string& out) {
    const EmbeddingBagLayer& p = l.embedding_bag();
    if (ins.size() != 1) {
      return Unsupported(l,
                         "an embedding bag of several fields; Keras' "
                         "Embedding reads one input");
    }
    const TrainedVariable* table = m_.Find(p.table());
    if (table == nullptr || !table->table || table->vocab_size <= 0) {
      return Unsupported(l,
                         "its table grows with the data (hashed ids); "
                         "Keras' Embedding has a fixed input_dim");
    }
    if (!tables_.insert(p.table()).second) {
      return Unsupported(l, absl::StrCat("table ", p.table(),
                                         " is shared with another layer; a "
                                         "Keras Embedding is one layer"));
    }
    const int64_t hotness = shape_of_[ins[0]][0];
    const bool mean = p.combiner() == MEAN;
    if (!mean && hotness != 1) {
      return Unsupported(l,
                         "sums a bag of several ids; Keras pools "
                         "embeddings by their mean "
                         "(GlobalAveragePooling1D)");
    }
    std::string emb = l.name();
    std::string pool = out != l.name() ? out : l.name() + "_pool";
    Layer("Embedding", emb,
          {{"input_dim", table->vocab_size},
           {"output_dim", p.dim()},
           {"embeddings_initializer", InitializerJson(p.initializer())},
           {"embeddings_regularizer", nullptr},
           {"activity_regularizer", nullptr},
           {"embeddings_constraint", nullptr},
           {"mask_zero", false}},
          ins, "", {p.table()});
    shape_of_[emb] = {hotness, p.dim()};
    if (mean) {
      return Layer("GlobalAveragePooling1D", pool,
                   {{"data_format", "channels_last"}, {"keepdims", false}},
                   {emb}, out);
    }
    return Layer("Flatten", pool, {{"data_format", "channels_last"}}, {emb},
                 out);
  }

  json LossJson() {
    switch (g_.loss().kind()) {
      case LossDef::SOFTMAX_CROSS_ENTROPY:
        return Object("keras.losses", "SparseCategoricalCrossentropy",
                      {{"name", "sparse_categorical_crossentropy"},
                       {"reduction", "sum_over_batch_size"},
                       {"from_logits", g_.loss().from_logits()},
                       {"ignore_class", nullptr}});
      case LossDef::SIGMOID_CROSS_ENTROPY:
        return Object("keras.losses", "BinaryCrossentropy",
                      {{"name", "binary_crossentropy"},
                       {"reduction", "sum_over_batch_size"},
                       {"from_logits", g_.loss().from_logits()},
                       {"label_smoothing", 0.0},
                       {"axis", -1}});
      default:
        return Object("keras.losses", "MeanSquaredError",
                      {{"name", "mean_squared_error"},
                       {"reduction", "sum_over_batch_size"}});
    }
  }

  json MetricsJson() {
    json metrics = json::array();
    for (int m : g_.metrics()) {
      if (m == ACCURACY) metrics.push_back("accuracy");
      if (m == AUC) {
        metrics.push_back(Object("keras.metrics", "AUC", {{"name", "auc"}}));
      }
    }
    return metrics;
  }

  absl::StatusOr<KerasExport> Finish(const std::vector<std::string>& outputs) {
    graph_.outputs = outputs;
    auto triples = [](const std::vector<std::string>& names) {
      if (names.size() == 1) return json::array({names[0], 0, 0});
      json list = json::array();
      for (const std::string& n : names) list.push_back({n, 0, 0});
      return list;
    };
    json loss = LossJson();
    json metrics = MetricsJson();
    if (outputs.size() > 1) {
      loss = json::object({{outputs[0], loss}});
      metrics = json::object({{outputs[0], metrics}});
    }
    KerasExport out;
    out.model_name = "tessera_model";
    absl::StatusOr<json> made = OptimizerJson(m_.job.optimizer());
    if (!made.ok()) return made.status();
    json optimizer = *std::move(made);
    out.optimizer_name = optimizer["config"]["name"].get<std::string>();
    out.config = {{"module", "keras.src.models.functional"},
                  {"class_name", "Functional"},
                  {"config",
                   {{"name", out.model_name},
                    {"trainable", true},
                    {"layers", layers_},
                    {"input_layers", triples(graph_.inputs)},
                    {"output_layers", triples(outputs)}}},
                  {"registered_name", "Functional"},
                  {"build_config", {{"input_shape", nullptr}}},
                  {"compile_config",
                   {{"optimizer", optimizer},
                    {"loss", loss},
                    {"loss_weights", nullptr},
                    {"metrics", metrics.empty() ? json() : metrics},
                    {"weighted_metrics", nullptr},
                    {"run_eagerly", false},
                    {"steps_per_execution", 1},
                    {"jit_compile", true}}}};
    const std::vector<std::string> order = KerasLayerOrder(graph_);
    const std::vector<std::string> groups = KerasWeightGroups(graph_, order);
    for (size_t i = 0; i < order.size(); ++i) {
      KerasLayerWeights w;
      w.group = groups[i];
      w.layer = order[i];
      for (const std::string& name : variables_[order[i]]) {
        const TrainedVariable* v = m_.Find(name);
        if (v == nullptr) {
          return absl::InternalError(
              absl::StrCat("the checkpoint has no variable ", name));
        }
        w.vars.push_back({v->shape, v->values});
      }
      out.weights.push_back(std::move(w));
    }
    return out;
  }

  const TrainedModel& m_;
  const ModelDef& g_;
  Activation fused_ = LINEAR;
  bool activated_ = false;
  json layers_ = json::array();
  KerasGraph graph_;
  absl::flat_hash_map<std::string, std::string> keras_of_;  // tensor -> layer
  absl::flat_hash_map<std::string, Shape> shape_of_;        // by Keras layer
  absl::flat_hash_map<std::string, std::string> dtype_of_;  // by Keras layer
  absl::flat_hash_map<std::string, int> readers_;           // by tensor
  std::map<std::string, std::vector<std::string>> variables_;  // by layer
  std::set<std::string> tables_;
};

}  // namespace

absl::StatusOr<KerasExport> ExportKerasModel(const TrainedModel& model) {
  return Exporter(model).Run();
}

}  // namespace tessera
