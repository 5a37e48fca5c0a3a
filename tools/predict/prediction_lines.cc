#include "tools/predict/prediction_lines.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {
namespace {

void AppendFloat(float v, std::string* out) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  out->append(buf);
}

std::string OutputName(const LayerDef& layer) {
  return layer.output().empty() ? layer.name() : layer.output();
}

}  // namespace

std::string LabeledMetrics(const PredictionLayout& layout, double mean_loss,
                           double accuracy) {
  if (!layout.classes) return absl::StrFormat("  loss (MSE) %.4f", mean_loss);
  return absl::StrFormat("  loss %.4f  accuracy %.4f", mean_loss, accuracy);
}

std::string PredictionHeader(const PredictionLayout& layout) {
  if (layout.format != PredictionFormat::kCsv) return "";
  std::string header = "index";
  for (int64_t c = 0; c < layout.width; ++c) {
    absl::StrAppend(&header, layout.classes ? ",p" : ",y", c);
  }
  if (layout.classes) header += ",class";
  return header;
}

void AppendPrediction(const PredictionLayout& layout, int64_t index,
                      absl::Span<const float> y, std::string* line) {
  const int64_t width = static_cast<int64_t>(y.size());
  const int64_t predicted =
      width == 1 ? (y[0] >= 0.5f ? 1 : 0)
                 : std::max_element(y.begin(), y.end()) - y.begin();
  if (layout.format == PredictionFormat::kCsv) {
    absl::StrAppend(line, index);
    for (int64_t c = 0; c < width; ++c) {
      *line += ',';
      AppendFloat(y[c], line);
    }
    if (layout.classes) absl::StrAppend(line, ",", predicted);
  } else {
    absl::StrAppend(
        line, "{\"index\":", index,
        layout.classes ? ",\"probabilities\":[" : ",\"predictions\":[");
    for (int64_t c = 0; c < width; ++c) {
      if (c > 0) *line += ',';
      AppendFloat(y[c], line);
    }
    *line += ']';
    if (layout.classes) absl::StrAppend(line, ",\"class\":", predicted);
    *line += '}';
  }
  *line += '\n';
}

void AppendOnnxInputs(const ModelDef& model, const HostBatch& batch, int64_t b,
                      int64_t index, const Predictor& predictor,
                      std::string* line) {
  absl::StrAppend(line, "{\"index\":", index);
  if (!batch.labeled) {
    // No label to write: the examples came without.
  } else if (!batch.class_labels.empty()) {
    absl::StrAppend(line, ",\"label\":", batch.class_labels[b]);
  } else {
    *line += ",\"label\":";
    AppendFloat(batch.labels[b], line);
  }
  int dense = 0;
  absl::flat_hash_map<std::string, int> sparse_index;
  absl::flat_hash_map<std::string, int64_t> max_hotness;
  for (const InputDef& in : model.inputs()) {
    if (in.has_sparse()) {
      const int next = static_cast<int>(sparse_index.size());
      sparse_index[in.name()] = next;
      max_hotness[in.name()] = in.sparse().max_hotness();
      continue;
    }
    absl::StrAppend(line, ",\"", in.name(), "\":[");
    const std::vector<float>& values = batch.dense[dense++];
    const int64_t n = static_cast<int64_t>(values.size()) / batch.size;
    for (int64_t k = 0; k < n; ++k) {
      if (k > 0) *line += ',';
      AppendFloat(values[b * n + k], line);
    }
    *line += ']';
  }
  // Each embedding_bag layer's ids, [fields][hotness], padded with -1 to
  // the fields' largest max_hotness (or the longest bag, if longer).
  for (const LayerDef& layer : model.layers()) {
    if (!layer.has_embedding_bag()) continue;
    int64_t hotness = 1;
    for (const std::string& field : layer.inputs()) {
      const int s = sparse_index.at(field);
      hotness = std::max({hotness, max_hotness.at(field),
                          batch.offsets[s][b + 1] - batch.offsets[s][b]});
    }
    absl::StrAppend(line, ",\"", OutputName(layer), "_ids\":[");
    for (int f = 0; f < layer.inputs_size(); ++f) {
      const int s = sparse_index.at(layer.inputs(f));
      const int64_t begin = batch.offsets[s][b], end = batch.offsets[s][b + 1];
      absl::StrAppend(line, f > 0 ? ",[" : "[");
      for (int64_t k = 0; k < hotness; ++k) {
        if (k > 0) *line += ',';
        absl::StrAppend(
            line, begin + k < end ? batch.ids[s][begin + k] : int64_t{-1});
      }
      *line += ']';
    }
    *line += ']';
  }
  std::vector<float> pooled;
  for (const LayerDef& layer : model.layers()) {
    if (!layer.has_embedding_bag()) continue;
    predictor.PoolEmbeddings(layer, sparse_index, batch, b, &pooled);
    absl::StrAppend(line, ",\"", OutputName(layer), "\":[");
    for (size_t k = 0; k < pooled.size(); ++k) {
      if (k > 0) *line += ',';
      AppendFloat(pooled[k], line);
    }
    *line += ']';
  }
  *line += "}\n";
}

}  // namespace tessera
