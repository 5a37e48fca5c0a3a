#include "tools/keras/keras_graph.h"

#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera {
namespace {

std::string StringOr(const nlohmann::json& j, const char* key,
                     const std::string& fallback = "") {
  if (j.is_object() && j.contains(key) && j[key].is_string()) {
    return j[key].get<std::string>();
  }
  return fallback;
}

// Collects the keras_history layer names of Keras 3's serialized tensors
// in `args`, depth first, in order.
void CollectKeras3Tensors(const nlohmann::json& args,
                          std::vector<std::string>* out, bool* bad_index) {
  if (args.is_array()) {
    for (const nlohmann::json& a : args)
      CollectKeras3Tensors(a, out, bad_index);
    return;
  }
  if (!args.is_object()) return;
  if (StringOr(args, "class_name") == "__keras_tensor__") {
    const nlohmann::json& history = args["config"]["keras_history"];
    if (history.is_array() && !history.empty() && history[0].is_string()) {
      out->push_back(history[0].get<std::string>());
      if (history.size() >= 3 && history[2].is_number() &&
          history[2].get<int>() != 0) {
        *bad_index = true;
      }
    }
    return;
  }
  for (const auto& [key, value] : args.items()) {
    CollectKeras3Tensors(value, out, bad_index);
  }
}

// ["name", 0, 0] or [["a", 0, 0], ["b", 0, 0]] or {"a": ["a", 0, 0]}.
std::vector<std::string> TensorList(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (j.is_array() && !j.empty() && j[0].is_string()) {
    out.push_back(j[0].get<std::string>());
  } else if (j.is_array()) {
    for (const nlohmann::json& t : j) {
      std::vector<std::string> sub = TensorList(t);
      out.insert(out.end(), sub.begin(), sub.end());
    }
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      std::vector<std::string> sub = TensorList(value);
      out.insert(out.end(), sub.begin(), sub.end());
    }
  }
  return out;
}

absl::StatusOr<KerasNode> ReadNode(const nlohmann::json& item) {
  KerasNode node;
  if (!item.is_object() || !item.contains("config") ||
      !item["config"].is_object()) {
    return absl::InvalidArgumentError("a layer entry without a config object");
  }
  node.class_name = StringOr(item, "class_name");
  node.config = item["config"];
  node.name = StringOr(item, "name", StringOr(node.config, "name"));
  if (node.name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a layer of class ", node.class_name, " has no name"));
  }
  return node;
}

// The inbound_nodes of a Functional's layer: its input layers.
absl::Status ReadInbound(const nlohmann::json& item, KerasNode* node) {
  if (!item.contains("inbound_nodes")) return absl::OkStatus();
  const nlohmann::json& nodes = item["inbound_nodes"];
  if (!nodes.is_array()) return absl::OkStatus();
  if (nodes.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer \"", node->name, "\" (", node->class_name, ") is called ",
        nodes.size(),
        " times: Tessera's layers own their variables, so a shared layer "
        "cannot be expressed (call each layer once)"));
  }
  if (nodes.empty()) return absl::OkStatus();
  const nlohmann::json& call = nodes[0];
  bool bad_index = false;
  if (call.is_object()) {  // Keras 3: {"args": [...], "kwargs": {...}}
    CollectKeras3Tensors(call.value("args", nlohmann::json::array()),
                         &node->inputs, &bad_index);
    std::vector<std::string> kw;
    CollectKeras3Tensors(call.value("kwargs", nlohmann::json::object()), &kw,
                         &bad_index);
    if (!kw.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer \"", node->name, "\" (", node->class_name,
          ") is called with tensors as keyword arguments (",
          absl::StrJoin(kw, ", "), "), which Tessera's layers do not take"));
    }
  } else if (call.is_array()) {  // Keras 2: [["name", 0, 0, {}], ...]
    for (const nlohmann::json& t : call) {
      if (t.is_array() && !t.empty() && t[0].is_string()) {
        node->inputs.push_back(t[0].get<std::string>());
        if (t.size() >= 3 && t[2].is_number() && t[2].get<int>() != 0) {
          bad_index = true;
        }
      }
    }
  }
  if (bad_index) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer \"", node->name, "\" (", node->class_name,
        ") reads the second output of a layer; Tessera's layers have one"));
  }
  return absl::OkStatus();
}

// The model's kind (Sequential or Functional) and Keras version.
absl::Status ReadModelClass(const nlohmann::json& model, KerasGraph* g) {
  if (!model.is_object()) {
    return absl::InvalidArgumentError("the model config is not a JSON object");
  }
  const std::string cls = StringOr(model, "class_name");
  if (model.contains("keras_version") && model["keras_version"].is_string() &&
      model["keras_version"].get<std::string>().rfind("2.", 0) == 0) {
    g->keras_major = 2;
  }
  if (cls == "Sequential") {
    g->sequential = true;
  } else if (cls != "Functional" && cls != "Model") {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model is of class \"", cls.empty() ? "?" : cls,
        "\": Tessera reads Sequential and Functional models (a subclassed "
        "model's call() is Python code, which a config does not hold)"));
  }
  if (!model.contains("config") || !model["config"].is_object() ||
      !model["config"].contains("layers") ||
      !model["config"]["layers"].is_array()) {
    return absl::InvalidArgumentError(
        "the model config has no \"config\": {\"layers\": [...]}");
  }
  return absl::OkStatus();
}

// Appends config's layers to g->layers, their names to *names.
absl::Status ReadLayers(const nlohmann::json& config, KerasGraph* g,
                        std::set<std::string>* names) {
  for (const nlohmann::json& item : config["layers"]) {
    absl::StatusOr<KerasNode> node = ReadNode(item);
    if (!node.ok()) return node.status();
    if (node->class_name == "Sequential" || node->class_name == "Functional" ||
        node->class_name == "Model") {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer \"", node->name, "\" (", node->class_name,
          ") is a model inside the model: Tessera reads one level of layers "
          "(build the outer model from the inner one's layers)"));
    }
    if (!names->insert(node->name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("two layers are named \"", node->name, "\""));
    }
    if (!g->sequential) {
      if (absl::Status s = ReadInbound(item, &*node); !s.ok()) return s;
    }
    g->layers.push_back(*std::move(node));
  }
  return absl::OkStatus();
}

// A Sequential model's layers each read the one before, from an
// InputLayer first.
absl::Status ChainSequential(KerasGraph* g) {
  if (g->layers.empty()) {
    return absl::InvalidArgumentError("the Sequential model has no layers");
  }
  if (g->layers[0].class_name != "InputLayer") {
    // Keras 2 writes the input's shape on the first layer instead.
    const nlohmann::json& first = g->layers[0].config;
    const char* key = first.contains("batch_input_shape") ? "batch_input_shape"
                      : first.contains("batch_shape")     ? "batch_shape"
                                                          : nullptr;
    if (key == nullptr) {
      return absl::InvalidArgumentError(
          "the Sequential model has no input shape (add keras.Input(shape) "
          "as its first layer, or build it, before saving)");
    }
    KerasNode input;
    input.name = "input_layer";
    input.class_name = "InputLayer";
    input.config = {{"batch_shape", first[key]},
                    {"dtype", first.value("dtype", nlohmann::json("float32"))},
                    {"name", input.name}};
    g->layers.insert(g->layers.begin(), std::move(input));
  }
  for (size_t i = 1; i < g->layers.size(); ++i) {
    if (g->layers[i].class_name == "InputLayer") {
      return absl::InvalidArgumentError(
          absl::StrCat("the Sequential model has a second InputLayer \"",
                       g->layers[i].name, "\""));
    }
    g->layers[i].inputs = {g->layers[i - 1].name};
  }
  g->inputs = {g->layers.front().name};
  g->outputs = {g->layers.back().name};
  return absl::OkStatus();
}

// A Functional model's inputs and outputs, and every layer's inputs, must
// be layers of the model.
absl::Status LinkFunctional(const nlohmann::json& config,
                            const std::set<std::string>& names, KerasGraph* g) {
  g->inputs = TensorList(config.value("input_layers", nlohmann::json()));
  g->outputs = TensorList(config.value("output_layers", nlohmann::json()));
  if (g->inputs.empty() || g->outputs.empty()) {
    return absl::InvalidArgumentError(
        "the Functional model names no input_layers or output_layers");
  }
  for (const KerasNode& n : g->layers) {
    for (const std::string& in : n.inputs) {
      if (names.count(in) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer \"", n.name, "\" reads layer \"", in,
                         "\", which the model does not have"));
      }
    }
    if (n.class_name != "InputLayer" && n.inputs.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer \"", n.name, "\" (", n.class_name, ") is never called"));
    }
  }
  for (const std::string& name : g->inputs) {
    const KerasNode* n = g->Find(name);
    if (n == nullptr || n->class_name != "InputLayer") {
      return absl::InvalidArgumentError(absl::StrCat(
          "model input \"", name, "\" is not an InputLayer of the model"));
    }
  }
  for (const std::string& name : g->outputs) {
    if (g->Find(name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model output \"", name, "\" is not a layer of the model"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const KerasNode* KerasGraph::Find(const std::string& name) const {
  for (const KerasNode& n : layers) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

absl::StatusOr<KerasGraph> ParseKerasGraph(const nlohmann::json& model) {
  KerasGraph g;
  if (absl::Status s = ReadModelClass(model, &g); !s.ok()) return s;
  const nlohmann::json& config = model["config"];
  g.name = StringOr(config, "name", g.sequential ? "sequential" : "functional");
  std::set<std::string> names;
  if (absl::Status s = ReadLayers(config, &g, &names); !s.ok()) return s;
  absl::Status linked =
      g.sequential ? ChainSequential(&g) : LinkFunctional(config, names, &g);
  if (!linked.ok()) return linked;
  return g;
}

std::vector<std::string> KerasLayerOrder(const KerasGraph& graph) {
  std::vector<std::string> order;
  if (graph.sequential) {
    for (const KerasNode& n : graph.layers) {
      if (n.class_name != "InputLayer") order.push_back(n.name);
    }
    return order;
  }
  // keras/src/ops/function.py map_graph and _build_map: a depth-first walk
  // from each output numbers layers on first visit and lists them after
  // their inputs; depths then grow from the outputs towards the inputs.
  absl::flat_hash_map<std::string, int> index;
  std::set<std::string> finished;
  std::vector<std::string> post;
  std::function<void(const std::string&)> visit = [&](const std::string& n) {
    if (finished.count(n) != 0) return;
    if (!index.contains(n)) index[n] = static_cast<int>(index.size());
    for (const std::string& in : graph.Find(n)->inputs) visit(in);
    finished.insert(n);
    post.push_back(n);
  };
  for (const std::string& out : graph.outputs) visit(out);
  absl::flat_hash_map<std::string, int> depth;
  for (auto it = post.rbegin(); it != post.rend(); ++it) {
    const int d = depth.try_emplace(*it, 0).first->second;
    for (const std::string& in : graph.Find(*it)->inputs) {
      int& p = depth.try_emplace(in, 0).first->second;
      p = std::max(p, d + 1);
    }
  }
  for (const std::string& in : graph.inputs) {
    if (!depth.contains(in)) {
      depth[in] = 0;
      index[in] = -1;
    }
  }
  for (const auto& [name, d] : depth) order.push_back(name);
  std::sort(order.begin(), order.end(),
            [&](const std::string& a, const std::string& b) {
              if (depth[a] != depth[b]) return depth[a] > depth[b];
              return index[a] < index[b];
            });
  return order;
}

std::string KerasSnakeCase(const std::string& class_name) {
  static const std::regex kNonWord("\\W+");
  static const std::regex kCapWord("(.)([A-Z][a-z]+)");
  static const std::regex kLowerUpper("([a-z])([A-Z])");
  std::string s = std::regex_replace(class_name, kNonWord, "");
  s = std::regex_replace(s, kCapWord, "$1_$2");
  s = std::regex_replace(s, kLowerUpper, "$1_$2");
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::vector<std::string> KerasWeightGroups(
    const KerasGraph& graph, const std::vector<std::string>& order) {
  std::map<std::string, int> used;
  std::vector<std::string> groups;
  for (const std::string& name : order) {
    const std::string base = KerasSnakeCase(graph.Find(name)->class_name);
    auto [it, first] = used.try_emplace(base, 0);
    if (!first) ++it->second;
    groups.push_back(first ? absl::StrCat("layers/", base)
                           : absl::StrCat("layers/", base, "_", it->second));
  }
  return groups;
}

}  // namespace tessera
