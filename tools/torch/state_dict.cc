#include "tools/torch/state_dict.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace tessera {
namespace {

std::string OutputOf(const LayerDef& layer) {
  return layer.output().empty() ? layer.name() : layer.output();
}

// The [h, w, c] image whose flatten `tensor` is, looking through layers
// that keep each element where it is (activations, dropout); empty when it
// is not one.
std::vector<int64_t> FlattenedImage(
    const ModelGraph& graph,
    const absl::flat_hash_map<std::string, const LayerDef*>& producer,
    std::string tensor) {
  for (int hops = 0; hops < 1000; ++hops) {
    auto it = producer.find(tensor);
    if (it == producer.end()) return {};
    const LayerDef& layer = *it->second;
    if (layer.has_activation() || layer.has_dropout()) {
      tensor = layer.inputs(0);
      continue;
    }
    if (!layer.has_flatten()) return {};
    auto in = graph.tensors.find(layer.inputs(0));
    if (in == graph.tensors.end() || in->second.shape.size() != 3) return {};
    const std::vector<int64_t>& s = in->second.shape;
    // With one channel, or one pixel, both orders agree.
    if (s[2] == 1 || s[0] * s[1] == 1) return {};
    return s;
  }
  return {};
}

// Column of PyTorch's flatten of [c, h, w] for row `r` of Tessera's
// flatten of [h, w, c].
int64_t TorchColumn(const std::vector<int64_t>& image, int64_t r) {
  const int64_t h = image[0], w = image[1], c = image[2];
  const int64_t k = r % c;
  const int64_t j = (r / c) % w;
  const int64_t i = r / (c * w);
  return (k * h + i) * w + j;
}

// For each Tessera kernel row, the PyTorch weight column.
std::vector<int64_t> DenseColumns(const StateDictEntry& e) {
  std::vector<int64_t> columns;
  int64_t base = 0;
  for (size_t i = 0; i < e.input_rows.size(); ++i) {
    for (int64_t r = 0; r < e.input_rows[i]; ++r) {
      columns.push_back(base + (e.input_images[i].empty()
                                    ? r
                                    : TorchColumn(e.input_images[i], r)));
    }
    base += e.input_rows[i];
  }
  return columns;
}

}  // namespace

std::vector<StateDictEntry> StateDictLayout(const ModelGraph& graph) {
  absl::flat_hash_map<std::string, const LayerDef*> producer;
  absl::flat_hash_map<std::string, const LayerDef*> owner;  // by variable
  absl::flat_hash_map<std::string, std::string> key;        // by variable
  for (const LayerDef& layer : graph.resolved.layers()) {
    producer[OutputOf(layer)] = &layer;
    const std::string& n = layer.name();
    auto name = [&](const char* tessera, const char* torch) {
      key[absl::StrCat(n, "/", tessera)] = absl::StrCat(n, ".", torch);
      owner[absl::StrCat(n, "/", tessera)] = &layer;
    };
    if (layer.has_dense() || layer.has_conv2d()) {
      name("kernel", "weight");
      name("bias", "bias");
    } else if (layer.has_batch_norm()) {
      name("gamma", "weight");
      name("beta", "bias");
      name("moving_mean", "running_mean");
      name("moving_variance", "running_var");
    } else if (layer.has_layer_norm()) {
      name("gamma", "weight");
      name("beta", "bias");
    } else if (layer.has_embedding_bag()) {
      const std::string& table = layer.embedding_bag().table().empty()
                                     ? n
                                     : layer.embedding_bag().table();
      key[table] = absl::StrCat(table, ".weight");
    }
  }
  std::vector<StateDictEntry> entries;
  for (const VariableDef& v : graph.variables) {
    StateDictEntry e;
    e.variable = v.name;
    e.shape = v.shape;
    e.key_shape = v.shape;
    e.sparse = v.sparse;
    auto k = key.find(v.name);
    e.key =
        k != key.end() ? k->second : absl::StrReplaceAll(v.name, {{"/", "."}});
    auto o = owner.find(v.name);
    const bool kernel =
        o != owner.end() && v.name == o->second->name() + "/kernel";
    if (kernel && o->second->has_dense() && v.shape.size() == 2) {
      e.layout = StateDictEntry::Layout::kDenseKernel;
      e.key_shape = {v.shape[1], v.shape[0]};
      for (const std::string& in : o->second->inputs()) {
        auto t = graph.tensors.find(in);
        const int64_t rows =
            t == graph.tensors.end() ? 0 : NumElements(t->second.shape);
        e.input_rows.push_back(rows);
        e.input_images.push_back(FlattenedImage(graph, producer, in));
      }
      int64_t total = 0;
      for (int64_t r : e.input_rows) total += r;
      if (total != v.shape[0]) {  // not the layout assumed: keep the rows
        e.input_rows = {v.shape[0]};
        e.input_images = {{}};
      }
    } else if (kernel && o->second->has_conv2d() && v.shape.size() == 4) {
      e.layout = StateDictEntry::Layout::kConvKernel;
      e.key_shape = {v.shape[3], v.shape[2], v.shape[0], v.shape[1]};
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

std::vector<std::string> StateDictBufferKeys(const ModelGraph& graph) {
  std::vector<std::string> keys;
  for (const LayerDef& layer : graph.resolved.layers()) {
    if (layer.has_batch_norm()) {
      keys.push_back(absl::StrCat(layer.name(), ".num_batches_tracked"));
    }
  }
  return keys;
}

namespace {

// Where each element of a Tessera variable (row-major in its own shape)
// sits in the state_dict's tensor: one map for both directions, so the
// two conversions cannot disagree. Empty when the layouts are the same.
std::vector<int64_t> StateDictPositions(const StateDictEntry& e, size_t n) {
  std::vector<int64_t> at;
  if (e.layout == StateDictEntry::Layout::kDenseKernel) {
    at.resize(n);
    const int64_t in = e.shape[0], units = e.shape[1];
    const std::vector<int64_t> columns = DenseColumns(e);
    for (int64_t r = 0; r < in; ++r) {
      for (int64_t u = 0; u < units; ++u) {
        at[r * units + u] = u * in + columns[r];
      }
    }
  } else if (e.layout == StateDictEntry::Layout::kConvKernel) {
    at.resize(n);
    const int64_t kh = e.shape[0], kw = e.shape[1], ci = e.shape[2],
                  co = e.shape[3];
    for (int64_t y = 0; y < kh; ++y) {
      for (int64_t x = 0; x < kw; ++x) {
        for (int64_t i = 0; i < ci; ++i) {
          for (int64_t o = 0; o < co; ++o) {
            at[((y * kw + x) * ci + i) * co + o] =
                ((o * ci + i) * kh + y) * kw + x;
          }
        }
      }
    }
  }
  return at;
}

}  // namespace

std::vector<float> ToStateDictLayout(const StateDictEntry& e,
                                     const std::vector<float>& values) {
  const std::vector<int64_t> at = StateDictPositions(e, values.size());
  if (at.empty()) return values;
  std::vector<float> out(values.size());
  for (size_t k = 0; k < values.size(); ++k) out[at[k]] = values[k];
  return out;
}

std::vector<float> FromStateDictLayout(const StateDictEntry& e,
                                       const std::vector<float>& values) {
  const std::vector<int64_t> at = StateDictPositions(e, values.size());
  if (at.empty()) return values;
  std::vector<float> out(values.size());
  for (size_t k = 0; k < values.size(); ++k) out[k] = values[at[k]];
  return out;
}

absl::StatusOr<std::vector<VariableValues>> VariablesFromStateDict(
    const ModelGraph& graph, const Safetensors& file) {
  std::set<std::string> unread;
  for (const SafetensorsTensor& t : file.tensors) unread.insert(t.name);
  for (const std::string& k : StateDictBufferKeys(graph)) unread.erase(k);
  std::vector<VariableValues> out;
  for (const StateDictEntry& e : StateDictLayout(graph)) {
    const SafetensorsTensor* t = file.Find(e.key);
    bool torch_layout = t != nullptr;
    if (t == nullptr) t = file.Find(e.variable);
    if (t == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("no tensor for variable ", e.variable, " (looked for \"",
                       e.key, "\" and \"", e.variable, "\")"));
    }
    unread.erase(t->name);
    if (e.sparse && e.shape[0] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", e.variable,
                       " grows with the data: it has no initial rows"));
    }
    const std::vector<int64_t>& want = torch_layout ? e.key_shape : e.shape;
    if (t->shape != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor \"", t->name, "\" has shape ", ShapeString(t->shape),
          "; variable ", e.variable, " needs ", ShapeString(want)));
    }
    absl::StatusOr<std::vector<float>> values = SafetensorsFloats(*t);
    if (!values.ok()) return values.status();
    out.push_back(
        {e.variable, e.shape,
         torch_layout ? FromStateDictLayout(e, *values) : std::move(*values)});
  }
  if (!unread.empty()) {
    std::vector<std::string> names(unread.begin(), unread.end());
    if (names.size() > 10) names.resize(10);
    return absl::InvalidArgumentError(absl::StrCat(
        unread.size(), " tensors name no variable of the model: ",
        absl::StrJoin(names, ", "), unread.size() > 10 ? ", ..." : ""));
  }
  return out;
}

Safetensors StateDictFromTrainedModel(const TrainedModel& model) {
  Safetensors file;
  file.metadata["format"] = "pt";
  for (const StateDictEntry& e : StateDictLayout(model.graph)) {
    const TrainedVariable* v = model.Find(e.variable);
    if (v == nullptr) continue;
    if (v->table && v->vocab_size == 0) {
      // A growing table: the rows it holds, and beside them their ids.
      file.tensors.push_back(FloatTensor(e.key, v->shape, v->values));
      file.tensors.push_back(
          Int64Tensor(absl::StrCat(e.key.substr(0, e.key.rfind('.')), ".ids"),
                      {static_cast<int64_t>(v->ids.size())}, v->ids));
      continue;
    }
    file.tensors.push_back(
        FloatTensor(e.key, e.key_shape, ToStateDictLayout(e, v->values)));
  }
  for (const std::string& k : StateDictBufferKeys(model.graph)) {
    file.tensors.push_back(Int64Tensor(k, {}, {0}));
  }
  return file;
}

}  // namespace tessera
