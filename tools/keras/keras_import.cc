#include "tools/keras/keras_import.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model/layer_kinds.h"
#include "common/model/model_graph.h"
#include "common/optimizer/keras_defaults.h"
#include "tools/keras/keras_compile.h"
#include "tools/keras/keras_config.h"
#include "tools/keras/keras_graph.h"
#include "tools/keras/keras_layers.h"

namespace tessera {
namespace {

using json = nlohmann::json;
using keras::DtypeName;
using keras::LossSpec;
using keras::ObjectName;
using keras::ParseInitializer;
using keras::ParseLoss;
using keras::ParseOptimizer;
using keras::Refuse;
using keras::RequireChannelsLast;
using keras::RequireNull;
using keras::WeightRef;

class Converter {
 public:
  Converter(const KerasGraph& g, const KerasImportOptions& options,
            const json& compile)
      : g_(g), options_(options), compile_(compile) {
    for (const KerasNode& n : g_.layers) {
      for (const std::string& in : n.inputs) consumers_[in].push_back(&n);
    }
  }

  absl::Status Run(KerasImport* out) {
    out_ = out;
    model_ = out->job.mutable_model_def();
    for (const std::string& name : g_.inputs) {
      if (absl::Status s = AddInput(*g_.Find(name)); !s.ok()) return s;
    }
    for (const KerasNode& n : g_.layers) {
      if (n.class_name == "InputLayer") {
        if (!tensor_.contains(n.name)) {
          return Refuse(n, "an input the model does not list as an input");
        }
        continue;
      }
      if (absl::Status s = AddLayer(n); !s.ok()) return s;
    }
    return AddLoss();
  }

  const std::vector<WeightRef>& weights() const { return weights_; }

 private:
  absl::Status AddInput(const KerasNode& n) {
    const json& c = n.config;
    const json& batch = c.contains("batch_shape") ? c["batch_shape"]
                        : c.contains("batch_input_shape")
                            ? c["batch_input_shape"]
                            : json();
    if (!batch.is_array() || batch.empty()) {
      return Refuse(n, "no batch_shape: the input's shape is unknown");
    }
    Shape shape;
    for (size_t i = 1; i < batch.size(); ++i) {
      if (!batch[i].is_number_integer() || batch[i].get<int64_t>() < 1) {
        return Refuse(
            n, absl::StrCat("dimension ", i, " of the input is not fixed (",
                            batch[i].dump(),
                            "): Tessera's inputs have fixed shapes"));
      }
      shape.push_back(batch[i].get<int64_t>());
    }
    if (c.value("sparse", false) || c.value("ragged", false)) {
      return Refuse(n,
                    "a sparse or ragged input: Tessera's inputs are dense "
                    "tensors (ids for Embedding)");
    }
    const std::string dtype = DtypeName(c.value("dtype", json("float32")));
    InputDef* in = model_->add_inputs();
    in->set_name(n.name);
    TensorFacts facts;
    facts.shape = shape;
    if (absl::StartsWith(dtype, "int") || absl::StartsWith(dtype, "uint")) {
      int64_t vocab = -1;
      for (const KerasNode* user : consumers_[n.name]) {
        if (user->class_name != "Embedding") {
          return Refuse(n, absl::StrCat("an integer input read by layer \"",
                                        user->name, "\" (", user->class_name,
                                        "): Tessera reads ids with Embedding "
                                        "only"));
        }
        const int64_t v = user->config.value("input_dim", int64_t{0});
        if (vocab >= 0 && v != vocab) {
          return Refuse(n, "read by Embedding layers of different input_dim");
        }
        vocab = v;
      }
      if (shape.size() != 1) {
        return Refuse(n, absl::StrCat("ids of shape ", ShapeString(shape),
                                      ": Tessera's id inputs are [n] (a bag "
                                      "of n ids)"));
      }
      SparseFeature* sparse = in->mutable_sparse();
      sparse->set_max_hotness(static_cast<int32_t>(shape[0]));
      sparse->set_vocab_size(std::max<int64_t>(vocab, 0));
      // Keras' Embedding has no row for an id outside [0, input_dim): such
      // an id is refused rather than wrapped, in training as in predict.
      if (sparse->vocab_size() > 0) sparse->set_ids_in_vocab(true);
      facts.sparse = true;
      facts.vocab_size = sparse->vocab_size();
    } else if (dtype == "float32" || dtype == "float64" || dtype == "float16" ||
               dtype == "bfloat16") {
      for (int64_t d : shape) in->mutable_dense()->add_shape(d);
    } else {
      return Refuse(n, absl::StrCat("dtype ", dtype,
                                    ": Tessera's inputs are floats or "
                                    "integer ids"));
    }
    tensor_[n.name] = n.name;
    facts_[n.name] = facts;
    return absl::OkStatus();
  }

  // The Tessera tensors `n` reads.
  absl::StatusOr<std::vector<std::string>> Inputs(const KerasNode& n) {
    std::vector<std::string> ins;
    for (const std::string& k : n.inputs) {
      auto it = tensor_.find(k);
      if (it == tensor_.end()) {
        const KerasNode* src = g_.Find(k);
        if (src != nullptr && src->class_name == "Embedding") {
          return Refuse(
              n, absl::StrCat("reads Embedding \"", k,
                              "\": Tessera pools an embedding's ids right "
                              "away (GlobalAveragePooling1D: mean; Flatten "
                              "of one id)"));
        }
        return Refuse(n, absl::StrCat("reads layer \"", k,
                                      "\", which comes later in the config"));
      }
      ins.push_back(it->second);
    }
    return ins;
  }

  absl::Status Emit(const KerasNode& n, LayerDef layer) {
    LayerDef resolved = layer;
    ResolveLayerDefaults(&resolved);
    std::vector<TensorFacts> facts;
    for (const std::string& in : layer.inputs()) facts.push_back(facts_[in]);
    absl::StatusOr<Shape> shape = InferLayerShape(resolved, facts);
    if (!shape.ok()) return Refuse(n, shape.status().message());
    const std::string out =
        layer.output().empty() ? layer.name() : layer.output();
    facts_[out].shape = *shape;
    tensor_[n.name] = out;
    producer_[out] = model_->layers_size();
    *model_->add_layers() = std::move(layer);
    return absl::OkStatus();
  }

  absl::Status AddLayer(const KerasNode& n) {
    if (n.config.contains("dtype") && !n.config["dtype"].is_null()) {
      const std::string dtype = DtypeName(n.config["dtype"]);
      if (dtype != "float32") {
        return Refuse(n, absl::StrCat("dtype ", dtype,
                                      ": Tessera's layers compute and keep "
                                      "their weights in float32"));
      }
    }
    if (n.class_name == "Embedding") return CheckEmbedding(n);
    absl::StatusOr<std::vector<std::string>> ins = Inputs(n);
    if (!ins.ok()) {
      if (n.class_name == "GlobalAveragePooling1D" ||
          n.class_name == "Flatten") {
        if (n.inputs.size() == 1 && g_.Find(n.inputs[0]) != nullptr &&
            g_.Find(n.inputs[0])->class_name == "Embedding") {
          return AddEmbeddingBag(*g_.Find(n.inputs[0]), n);
        }
      }
      return ins.status();
    }
    LayerDef layer;
    layer.set_name(n.name);
    std::vector<TensorFacts> facts;
    for (const std::string& in : *ins) {
      layer.add_inputs(in);
      facts.push_back(facts_[in]);
    }
    if (absl::Status s =
            keras::TranslateKerasLayer(n, facts, &layer, &weights_);
        !s.ok()) {
      return s;
    }
    return Emit(n, std::move(layer));
  }

  absl::Status CheckEmbedding(const KerasNode& n) {
    const std::vector<const KerasNode*>& users = consumers_[n.name];
    if (n.inputs.size() != 1 || !facts_.contains(n.inputs[0]) ||
        !facts_[n.inputs[0]].sparse) {
      return Refuse(n,
                    "reads something other than an integer model input: "
                    "Tessera looks up ids of its inputs only");
    }
    if (users.size() != 1 ||
        (users[0]->class_name != "GlobalAveragePooling1D" &&
         users[0]->class_name != "Flatten")) {
      return Refuse(n,
                    "is not followed by one GlobalAveragePooling1D or "
                    "Flatten: Tessera pools an embedding's ids right away "
                    "(a bag)");
    }
    if (n.config.value("mask_zero", false)) {
      return Refuse(n, "mask_zero: Tessera's bags have no masked id");
    }
    return RequireNull(n, {"embeddings_regularizer", "activity_regularizer",
                           "embeddings_constraint", "lora_rank"});
  }

  absl::Status AddEmbeddingBag(const KerasNode& emb, const KerasNode& pool) {
    const std::string input = emb.inputs[0];
    const int64_t hotness = facts_[input].shape[0];
    LayerDef layer;
    layer.set_name(emb.name);
    layer.add_inputs(input);
    layer.set_output(pool.name);
    EmbeddingBagLayer* p = layer.mutable_embedding_bag();
    p->set_dim(emb.config.value("output_dim", int64_t{0}));
    if (pool.class_name == "Flatten") {
      if (hotness != 1) {
        return Refuse(pool, absl::StrCat("flattens ", hotness,
                                         " embeddings of \"", emb.name,
                                         "\": Tessera pools a bag of ids (use "
                                         "GlobalAveragePooling1D, or one id)"));
      }
      p->set_combiner(SUM);
    } else {
      if (pool.config.value("keepdims", false)) {
        return Refuse(pool, "keepdims: Tessera's bag is [dim]");
      }
      if (absl::Status s = RequireChannelsLast(pool); !s.ok()) return s;
      p->set_combiner(MEAN);
    }
    Initializer keras_default;
    keras_default.set_kind(Initializer::UNIFORM);
    keras_default.set_minval(-0.05f);
    keras_default.set_maxval(0.05f);
    absl::StatusOr<std::optional<Initializer>> init =
        ParseInitializer(emb, "embeddings_initializer", keras_default);
    if (!init.ok()) return init.status();
    if (init->has_value()) *p->mutable_initializer() = **init;
    weights_.push_back({emb.name, 0, emb.name});
    if (absl::Status s = Emit(pool, std::move(layer)); !s.ok()) return s;
    tensor_[emb.name] = pool.name;
    return absl::OkStatus();
  }

  // The loss's entry for each model output (null: not trained).
  absl::StatusOr<std::vector<json>> LossPerOutput() {
    json loss = compile_.is_object() ? compile_.value("loss", json()) : json();
    if (!options_.loss.empty()) loss = options_.loss;
    std::vector<json> per(g_.outputs.size());
    if (loss.is_null()) return per;
    const bool single =
        loss.is_string() || (loss.is_object() && loss.contains("class_name"));
    if (single) {
      if (g_.outputs.size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the compile config applies one loss to all ", g_.outputs.size(),
            " outputs: Tessera trains one loss (give the others None, e.g. "
            "loss={\"",
            g_.outputs[0], "\": ...})"));
      }
      per[0] = loss;
    } else if (loss.is_array()) {
      for (size_t i = 0; i < loss.size() && i < per.size(); ++i)
        per[i] = loss[i];
    } else if (loss.is_object()) {
      for (size_t i = 0; i < per.size(); ++i) {
        per[i] = loss.value(g_.outputs[i], json());
      }
    }
    return per;
  }

  absl::Status AddLoss() {
    absl::StatusOr<std::vector<json>> per = LossPerOutput();
    if (!per.ok()) return per.status();
    absl::StatusOr<int> trained = TrainedOutput(*per);
    if (!trained.ok()) return trained.status();
    LossSpec spec;
    std::string output;
    if (*trained < 0) {
      trained = 0;
      output = g_.outputs[0];
      spec = AssumeLoss(output);
    } else {
      output = g_.outputs[*trained];
      absl::StatusOr<LossSpec> parsed = ParseLoss((*per)[*trained], output);
      if (!parsed.ok()) return parsed.status();
      spec = *parsed;
      if (absl::Status s = CheckLossWeight(*trained); !s.ok()) return s;
    }
    absl::StatusOr<std::string> input = SetLoss(spec, tensor_[output]);
    if (!input.ok()) return input.status();
    LabelDef* label = SetLabel(spec, *input);
    if (g_.outputs.size() > 1) {
      model_->add_outputs(*input);
      for (size_t i = 0; i < g_.outputs.size(); ++i) {
        if (static_cast<int>(i) != *trained) {
          model_->add_outputs(tensor_[g_.outputs[i]]);
        }
      }
    }
    AddMetrics(label->kind());
    return absl::OkStatus();
  }

  // The index of the one output with a loss, -1 when none has one.
  absl::StatusOr<int> TrainedOutput(const std::vector<json>& per) {
    int trained = -1;
    for (size_t i = 0; i < per.size(); ++i) {
      if (per[i].is_null()) continue;
      if (trained >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "outputs \"", g_.outputs[trained], "\" and \"", g_.outputs[i],
            "\" both have a loss: Tessera trains one loss"));
      }
      trained = static_cast<int>(i);
    }
    return trained;
  }

  // to_json() holds no compile config: the output layer suggests one.
  LossSpec AssumeLoss(const std::string& output) {
    LossSpec spec;
    const KerasNode& n = *g_.Find(output);
    const std::string act =
        ObjectName(n.config.value("activation", json("linear")));
    if (act == "softmax" || n.class_name == "Softmax") {
      spec.name = "sparse_categorical_crossentropy";
    } else if (act == "sigmoid" && n.config.value("units", 0) == 1) {
      spec.name = "binary_crossentropy";
    } else {
      spec.name = "mean_squared_error";
    }
    out_->notes.push_back(absl::StrCat("no compile config: loss ", spec.name,
                                       " assumed from output \"", output,
                                       "\" (--loss=NAME chooses another)"));
    return spec;
  }

  // Sets the model's loss, reading tensor `input` (or the logits under its
  // activation); returns the tensor the loss reads.
  absl::StatusOr<std::string> SetLoss(const LossSpec& spec, std::string input) {
    LossDef* loss = model_->mutable_loss();
    const bool softmax_ce = IsSoftmaxCrossEntropy(spec);
    if (spec.name == "categorical_crossentropy") {
      out_->notes.push_back(
          "categorical_crossentropy: Tessera's labels are class indices (as "
          "sparse_categorical_crossentropy), not one-hot vectors");
    }
    if (softmax_ce || spec.name == "binary_crossentropy") {
      loss->set_kind(softmax_ce ? LossDef::SOFTMAX_CROSS_ENTROPY
                                : LossDef::SIGMOID_CROSS_ENTROPY);
      if (spec.from_logits) {
        // Kept, so the export gives back a model that outputs logits too.
        loss->set_from_logits(true);
      } else {
        absl::StatusOr<std::string> logits =
            TakeActivation(input, softmax_ce ? SOFTMAX : SIGMOID, spec.name);
        if (!logits.ok()) return logits.status();
        input = *logits;
      }
    } else {
      loss->set_kind(LossDef::MEAN_SQUARED_ERROR);
    }
    loss->set_input(input);
    return input;
  }

  static bool IsSoftmaxCrossEntropy(const LossSpec& spec) {
    return spec.name == "sparse_categorical_crossentropy" ||
           spec.name == "categorical_crossentropy";
  }

  // The labels the loss reading tensor `input` takes.
  LabelDef* SetLabel(const LossSpec& spec, const std::string& input) {
    const Shape& shape = facts_[input].shape;
    LabelDef* label = model_->mutable_label();
    if (IsSoftmaxCrossEntropy(spec)) {
      label->set_kind(LabelDef::CLASS_INDEX);
      label->set_num_classes(shape.size() == 1 ? shape[0] : 0);
    } else if (spec.name == "binary_crossentropy") {
      label->set_kind(LabelDef::BINARY);
    } else {
      label->set_kind(LabelDef::REAL);
    }
    return label;
  }

  // The compile config's loss_weights, which Tessera has no place for:
  // only a weight of 1 on the trained output (what no weight means) is
  // taken; any other would scale the loss Keras trains.
  absl::Status CheckLossWeight(int trained) {
    if (!compile_.is_object()) return absl::OkStatus();
    const json w = compile_.value("loss_weights", json());
    if (w.is_null()) return absl::OkStatus();
    json mine;
    if (w.is_number()) {
      mine = w;
    } else if (w.is_array() && trained < static_cast<int>(w.size())) {
      mine = w[trained];
    } else if (w.is_object()) {
      mine = w.value(g_.outputs[trained], json());
    }
    if (mine.is_number() && mine.get<double>() == 1.0) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "compile config: loss_weights ", w.dump(), " for output \"",
        g_.outputs[trained],
        "\": Tessera trains its one loss unweighted (compile without "
        "loss_weights, or with weight 1)"));
  }

  // The logits behind output tensor `t`, which must end in `activation`:
  // the activation comes off its layer (Tessera's loss is fused with it).
  absl::StatusOr<std::string> TakeActivation(const std::string& t,
                                             Activation activation,
                                             const std::string& loss) {
    auto it = producer_.find(t);
    const std::string want = activation == SOFTMAX ? "softmax" : "sigmoid";
    if (it != producer_.end()) {
      LayerDef* layer = model_->mutable_layers(it->second);
      if (layer->has_dense() && layer->dense().activation() == activation) {
        layer->mutable_dense()->set_activation(LINEAR);
        return t;
      }
      if (layer->has_conv2d() && layer->conv2d().activation() == activation) {
        layer->mutable_conv2d()->set_activation(LINEAR);
        return t;
      }
      if (layer->has_activation() &&
          layer->activation().activation() == activation) {
        const std::string logits = layer->inputs(0);
        model_->mutable_layers()->erase(model_->mutable_layers()->begin() +
                                        it->second);
        producer_.clear();
        for (int i = 0; i < model_->layers_size(); ++i) {
          const LayerDef& l = model_->layers(i);
          producer_[l.output().empty() ? l.name() : l.output()] = i;
        }
        return logits;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("loss ", loss, " (from_logits=False) reads output \"", t,
                     "\", which does not end in ", want,
                     ": Tessera's loss reads logits and applies ", want,
                     " itself (end the model in ", want,
                     ", or compile with "
                     "from_logits=True)"));
  }

  void AddMetrics(LabelDef::Kind label) {
    if (!compile_.is_object() || !compile_.contains("metrics")) return;
    std::vector<std::string> names;
    std::function<void(const json&)> collect = [&](const json& m) {
      if (m.is_array()) {
        for (const json& x : m) collect(x);
      } else if (m.is_object() && !m.contains("class_name")) {
        for (const auto& [k, v] : m.items()) collect(v);
      } else if (!m.is_null()) {
        names.push_back(KerasSnakeCase(ObjectName(m)));
      }
    };
    collect(compile_["metrics"]);
    for (const std::string& name : names) {
      Metric metric = METRIC_UNSET;
      if (name == "accuracy" || name == "acc" ||
          name == "sparse_categorical_accuracy" ||
          name == "categorical_accuracy" || name == "binary_accuracy") {
        metric = ACCURACY;
      } else if (name == "auc") {
        metric = AUC;
      }
      if (metric == METRIC_UNSET ||
          (metric == AUC && label != LabelDef::BINARY)) {
        out_->notes.push_back(
            absl::StrCat("metric ", name,
                         " left out: Tessera reports accuracy, and AUC "
                         "and log loss for a binary label"));
        continue;
      }
      bool have = false;
      for (int m : model_->metrics()) have |= m == metric;
      if (!have) model_->add_metrics(metric);
    }
  }

  const KerasGraph& g_;
  const KerasImportOptions& options_;
  const json& compile_;
  KerasImport* out_ = nullptr;
  ModelDef* model_ = nullptr;
  std::map<std::string, std::vector<const KerasNode*>> consumers_;
  absl::flat_hash_map<std::string, std::string>
      tensor_;  // Keras layer -> tensor
  absl::flat_hash_map<std::string, TensorFacts> facts_;  // by tensor
  absl::flat_hash_map<std::string, int> producer_;       // tensor -> layer
  std::vector<WeightRef> weights_;
};

// The saved weights of each layer, by layer name: from the vars groups'
// name attributes, or (files that lack them) by the group Keras gives
// each layer.
absl::StatusOr<absl::flat_hash_map<std::string, const KerasLayerWeights*>>
WeightsByLayer(const KerasModelFile& file, const KerasGraph& g) {
  absl::flat_hash_map<std::string, const KerasLayerWeights*> by_layer;
  bool named = true;
  for (const KerasLayerWeights& w : file.weights) named &= !w.layer.empty();
  if (named) {
    for (const KerasLayerWeights& w : file.weights) by_layer[w.layer] = &w;
    return by_layer;
  }
  const std::vector<std::string> order = KerasLayerOrder(g);
  const std::vector<std::string> groups = KerasWeightGroups(g, order);
  for (size_t i = 0; i < order.size(); ++i) {
    for (const KerasLayerWeights& w : file.weights) {
      if (w.group == groups[i]) by_layer[order[i]] = &w;
    }
  }
  return by_layer;
}

}  // namespace

absl::StatusOr<KerasImport> ImportKerasModel(
    const KerasModelFile& file, const KerasImportOptions& options) {
  absl::StatusOr<KerasGraph> graph = ParseKerasGraph(file.config);
  if (!graph.ok()) return graph.status();
  KerasImport out;
  const json compile = file.config.is_object()
                           ? file.config.value("compile_config", json())
                           : json();
  Converter converter(*graph, options, compile);
  if (absl::Status s = converter.Run(&out); !s.ok()) return s;

  if (compile.is_object() && compile.contains("optimizer") &&
      !compile["optimizer"].is_null()) {
    absl::StatusOr<OptimizerConfig> opt = ParseOptimizer(compile["optimizer"]);
    if (!opt.ok()) return opt.status();
    *out.job.mutable_optimizer() = *opt;
  } else {
    OptimizerConfig* opt = out.job.mutable_optimizer();
    opt->set_learning_rate(kKerasLearningRate);
    *opt->mutable_adam() = KerasAdamOptions();
    opt->set_table_updates(TABLE_UPDATES_DENSE);  // as ParseOptimizer
    out.notes.push_back(
        "no compile config: optimizer Adam(learning_rate=0.001) assumed");
  }
  // Keras' fit() defaults: one epoch of batches of 32.
  out.job.mutable_schedule()->set_epochs(1);
  out.job.mutable_schedule()->set_batch_size(32);
  out.job.mutable_schedule()->set_seed(42);

  absl::StatusOr<ModelGraph> model =
      BuildModelGraph(out.job.model_def(), out.job.schedule().seed());
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the converted model: ", model.status().message()));
  }
  if (!file.has_weights) return out;
  absl::StatusOr<absl::flat_hash_map<std::string, const KerasLayerWeights*>>
      by_layer = WeightsByLayer(file, *graph);
  if (!by_layer.ok()) return by_layer.status();
  absl::flat_hash_map<std::string, KerasArray> values;
  for (const WeightRef& ref : converter.weights()) {
    auto it = by_layer->find(ref.layer);
    if (it == by_layer->end() ||
        static_cast<int>(it->second->vars.size()) <= ref.index) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.weights.h5 has no variable ", ref.index,
                       " of layer \"", ref.layer, "\" (", ref.variable, ")"));
    }
    values[ref.variable] = it->second->vars[ref.index];
  }
  for (const VariableDef& v : model->variables) {
    auto it = values.find(v.name);
    if (it == values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no saved value for variable ", v.name));
    }
    if (it->second.shape != v.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable ", v.name, ": saved shape ", ShapeString(it->second.shape),
          ", the model's ", ShapeString(v.shape)));
    }
    out.values.emplace_back(v.name, std::move(it->second));
  }
  return out;
}

}  // namespace tessera
