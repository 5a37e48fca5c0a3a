#include "common/model/model_graph.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/counter_rng.h"
#include "common/initializer.h"

namespace tessera {
namespace {

// Seed streams of each class of variable; the first models' variables keep
// the streams they always had (common/model_spec.cc).
constexpr uint64_t kTableSeedSalt = uint64_t{1} << 32;
constexpr uint64_t kOtherSeedSalt = uint64_t{1} << 33;

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("model: ", what));
}

absl::Status AddInputs(const ModelDef& model, ModelGraph* graph) {
  if (model.inputs().empty()) return Invalid("has no inputs");
  for (const InputDef& in : model.inputs()) {
    if (in.name().empty()) return Invalid("an input has no name");
    TensorFacts facts;
    if (in.has_dense()) {
      facts.shape.assign(in.dense().shape().begin(), in.dense().shape().end());
      if (facts.shape.empty()) {
        return Invalid(absl::StrCat("input \"", in.name(), "\" has no shape"));
      }
      for (int64_t d : facts.shape) {
        if (d < 1 || d > (int64_t{1} << 30)) {
          return Invalid(absl::StrCat("input \"", in.name(), "\" has shape ",
                                      ShapeString(facts.shape),
                                      "; every size must be positive"));
        }
      }
    } else if (in.has_sparse()) {
      const int32_t hotness = in.sparse().max_hotness();
      if (hotness < 0 || hotness > (1 << 20) || in.sparse().vocab_size() < 0) {
        return Invalid(absl::StrCat(
            "sparse input \"", in.name(),
            "\" needs max_hotness in [1, 2^20] (unset: 1) and vocab_size "
            ">= 0 (0: hashed ids)"));
      }
      facts.shape = {std::max(hotness, 1)};
      facts.sparse = true;
      facts.vocab_size = in.sparse().vocab_size();
    } else {
      return Invalid(absl::StrCat("input \"", in.name(),
                                  "\" is neither dense nor sparse"));
    }
    if (!graph->tensors.emplace(in.name(), facts).second) {
      return Invalid(absl::StrCat("input \"", in.name(), "\" is named twice"));
    }
  }
  return absl::OkStatus();
}

// The layers Order could not place read each other: the error names one
// cycle among them, `pending` counting each layer's unplaced inputs.
absl::Status CycleError(const ModelDef& model,
                        const absl::flat_hash_map<std::string, int>& writer,
                        const std::vector<int>& pending) {
  const int n = model.layers_size();
  // Walk back from a layer left over through writers that are left over
  // too until one repeats: that walk is a cycle.
  int at = 0;
  while (pending[at] == 0) ++at;
  std::vector<int> walk;
  std::vector<int> seen(n, -1);
  while (seen[at] < 0) {
    seen[at] = static_cast<int>(walk.size());
    walk.push_back(at);
    for (const std::string& in : model.layers(at).inputs()) {
      auto it = writer.find(in);
      if (it != writer.end() && pending[it->second] > 0) {
        at = it->second;
        break;
      }
    }
  }
  // The walk went from readers to writers; say it in data-flow order,
  // starting at the layer the description lists first.
  std::vector<int> loop(walk.rbegin(), walk.rend() - seen[at]);
  std::rotate(loop.begin(), std::min_element(loop.begin(), loop.end()),
              loop.end());
  std::vector<std::string> cycle;
  for (int i : loop) {
    cycle.push_back(absl::StrCat("\"", model.layers(i).name(), "\""));
  }
  cycle.push_back(cycle.front());
  return Invalid(
      absl::StrCat("layers form a cycle: ", absl::StrJoin(cycle, " -> ")));
}

// Orders the layers so each comes after the writers of its inputs (Kahn's
// algorithm, ties kept in description order); names a cycle if there is
// one, else an input nobody writes.
absl::Status Order(const ModelDef& model, ModelGraph* graph) {
  const int n = model.layers_size();
  // Names first: two layers of one name also write one tensor, and the
  // name is what the user repeated.
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < n; ++i) {
    const LayerDef& layer = model.layers(i);
    if (layer.name().empty()) {
      return Invalid(absl::StrCat("layer ", i, " has no name"));
    }
    if (!names.insert(layer.name()).second) {
      return Invalid(absl::StrCat("two layers are named \"", layer.name(),
                                  "\": give each layer its own name"));
    }
  }
  absl::flat_hash_map<std::string, int> writer;
  for (int i = 0; i < n; ++i) {
    const LayerDef& layer = model.layers(i);
    const std::string& out = layer.output();
    if (graph->tensors.contains(out) || !writer.emplace(out, i).second) {
      return Invalid(absl::StrCat(
          "tensor \"", out, "\" is written by layer \"", layer.name(),
          "\" and by ",
          graph->tensors.contains(out)
              ? "an input"
              : absl::StrCat("layer \"", model.layers(writer[out]).name(),
                             "\"")));
    }
  }
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> readers(n);
  for (int i = 0; i < n; ++i) {
    const LayerDef& layer = model.layers(i);
    if (layer.inputs().empty()) {
      return Invalid(
          absl::StrCat("layer \"", layer.name(), "\" reads nothing"));
    }
    for (const std::string& in : layer.inputs()) {
      if (graph->tensors.contains(in)) continue;
      auto it = writer.find(in);
      if (it == writer.end()) {
        return Invalid(absl::StrCat("layer \"", layer.name(),
                                    "\" reads tensor \"", in,
                                    "\", which no input or layer writes"));
      }
      ++pending[i];
      readers[it->second].push_back(i);
    }
  }
  std::vector<int> ready;
  for (int i = n - 1; i >= 0; --i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    std::sort(ready.rbegin(), ready.rend());
    const int i = ready.back();
    ready.pop_back();
    graph->order.push_back(i);
    for (int r : readers[i]) {
      if (--pending[r] == 0) ready.push_back(r);
    }
  }
  if (static_cast<int>(graph->order.size()) == n) return absl::OkStatus();
  return CycleError(model, writer, pending);
}

absl::Status CheckLoss(const ModelDef& model, const ModelGraph& graph) {
  const LossDef& loss = model.loss();
  if (loss.input().empty()) {
    return Invalid(absl::StrCat(
        model.has_loss() ? "the loss names no input tensor"
                         : "the model has no loss",
        ": add loss { kind: SOFTMAX_CROSS_ENTROPY (or SIGMOID_CROSS_ENTROPY, "
        "MEAN_SQUARED_ERROR) input: \"<the logits layer's output>\" }"));
  }
  auto it = graph.tensors.find(loss.input());
  if (it == graph.tensors.end()) {
    return Invalid(absl::StrCat("loss reads tensor \"", loss.input(),
                                "\", which no input or layer writes"));
  }
  const Shape& shape = it->second.shape;
  const LabelDef& label = model.label();
  switch (loss.kind()) {
    case LossDef::SOFTMAX_CROSS_ENTROPY:
      if (label.kind() != LabelDef::CLASS_INDEX || label.num_classes() < 2) {
        return Invalid(
            "loss softmax_cross_entropy needs a class_index label with "
            "num_classes >= 2");
      }
      if (shape != Shape{label.num_classes()}) {
        return Invalid(absl::StrCat(
            "loss softmax_cross_entropy reads \"", loss.input(), "\" of shape ",
            ShapeString(shape), " but the label has ", label.num_classes(),
            " classes: needs [", label.num_classes(), "]"));
      }
      return absl::OkStatus();
    case LossDef::SIGMOID_CROSS_ENTROPY:
      if (label.kind() != LabelDef::BINARY) {
        return Invalid("loss sigmoid_cross_entropy needs a binary label");
      }
      break;
    case LossDef::MEAN_SQUARED_ERROR:
      if (label.kind() != LabelDef::REAL) {
        return Invalid("loss mean_squared_error needs a real label");
      }
      break;
    default:
      return Invalid(
          "needs a loss (softmax_cross_entropy, sigmoid_cross_entropy, "
          "mean_squared_error)");
  }
  if (shape != Shape{1}) {
    return Invalid(absl::StrCat("loss reads \"", loss.input(), "\" of shape ",
                                ShapeString(shape), ", needs [1]"));
  }
  return absl::OkStatus();
}

// The job-seeded initializer of a layer variable.
Initializer Seeded(const LayerVariable& v, uint64_t seed, int64_t ordinal) {
  Initializer init = v.initializer;
  uint64_t salt = static_cast<uint64_t>(ordinal);
  if (v.seed_class == LayerVariable::SeedClass::kTable) salt += kTableSeedSalt;
  if (v.seed_class == LayerVariable::SeedClass::kOther) salt += kOtherSeedSalt;
  // Only random initializers draw from a seed; a constant one carries none.
  if (init.kind() == Initializer::UNIFORM ||
      init.kind() == Initializer::NORMAL ||
      init.kind() == Initializer::GLOROT_UNIFORM) {
    init.set_seed(DeriveSeed(seed, salt));
  }
  if (init.kind() == Initializer::GLOROT_UNIFORM) {
    // Keras' fans: a kernel [..., in, out] has receptive field the product
    // of the leading sizes.
    int64_t receptive = 1;
    for (size_t d = 0; d + 2 < v.shape.size(); ++d) receptive *= v.shape[d];
    const size_t r = v.shape.size();
    init.set_fan_in(r >= 2 ? v.shape[r - 2] * receptive : v.shape[0]);
    init.set_fan_out(r >= 2 ? v.shape[r - 1] * receptive : v.shape[0]);
  }
  return init;
}

}  // namespace

absl::StatusOr<ModelGraph> BuildModelGraph(const ModelDef& model,
                                           uint64_t seed) {
  ModelGraph graph;
  graph.resolved = model;
  for (LayerDef& layer : *graph.resolved.mutable_layers()) {
    ResolveLayerDefaults(&layer);
  }
  const ModelDef& m = graph.resolved;
  if (absl::Status s = AddInputs(m, &graph); !s.ok()) return s;
  if (absl::Status s = Order(m, &graph); !s.ok()) return s;

  absl::flat_hash_map<std::string, size_t> by_name;
  int64_t kernels = 0, tables = 0, others = 0;
  for (int i : graph.order) {
    const LayerDef& layer = m.layers(i);
    std::vector<TensorFacts> inputs;
    for (const std::string& in : layer.inputs()) {
      inputs.push_back(graph.tensors.at(in));
    }
    absl::StatusOr<Shape> shape = InferLayerShape(layer, inputs);
    if (!shape.ok()) return shape.status();
    graph.tensors[layer.output()] = TensorFacts{*shape};
    for (const LayerVariable& v : LayerVariables(layer, inputs)) {
      auto known = by_name.find(v.name);
      if (known != by_name.end()) {
        const VariableDef& first = graph.variables[known->second];
        if (!v.sparse || !first.sparse || first.shape != v.shape) {
          return Invalid(absl::StrCat(
              "layer \"", layer.name(), "\" names variable \"", v.name,
              "\" of shape ", ShapeString(v.shape),
              ", which another layer already has as ", ShapeString(first.shape),
              " (only embedding tables of one shape are shared)"));
        }
        continue;
      }
      int64_t* ordinal =
          v.seed_class == LayerVariable::SeedClass::kDenseKernel ? &kernels
          : v.seed_class == LayerVariable::SeedClass::kTable     ? &tables
                                                                 : &others;
      VariableDef def;
      def.name = v.name;
      def.shape = v.shape;
      def.sparse = v.sparse;
      def.initializer = Seeded(v, seed, (*ordinal)++);
      def.update_rule = v.update_rule;
      if (absl::Status s = ValidateInitializer(def.initializer); !s.ok()) {
        return Invalid(
            absl::StrCat("variable \"", v.name, "\": ", s.message()));
      }
      by_name[v.name] = graph.variables.size();
      graph.variables.push_back(std::move(def));
    }
  }
  if (absl::Status s = CheckLoss(m, graph); !s.ok()) return s;
  for (const std::string& out : m.outputs()) {
    if (!graph.tensors.contains(out)) {
      return Invalid(
          absl::StrCat("output \"", out, "\" is not a tensor of the model"));
    }
  }
  return graph;
}

}  // namespace tessera
