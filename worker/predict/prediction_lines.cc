#include "worker/predict/prediction_lines.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

void AppendFloat(float v, std::string* out) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  out->append(buf);
}

}  // namespace

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
  absl::StrAppend(line, "{\"index\":", index, ",\"label\":");
  if (!batch.class_labels.empty()) {
    absl::StrAppend(line, batch.class_labels[b]);
  } else {
    AppendFloat(batch.labels[b], line);
  }
  int dense = 0, sparse = 0;
  for (const InputDef& in : model.inputs()) {
    absl::StrAppend(line, ",\"", in.name(), "\":[");
    if (in.has_dense()) {
      const std::vector<float>& values = batch.dense[dense++];
      const int64_t n = static_cast<int64_t>(values.size()) / batch.size;
      for (int64_t k = 0; k < n; ++k) {
        if (k > 0) *line += ',';
        AppendFloat(values[b * n + k], line);
      }
    } else {
      const std::vector<int64_t>& offsets = batch.offsets[sparse];
      const std::vector<int64_t>& ids = batch.ids[sparse++];
      for (int64_t k = offsets[b]; k < offsets[b + 1]; ++k) {
        if (k > offsets[b]) *line += ',';
        absl::StrAppend(line, ids[k]);
      }
    }
    *line += ']';
  }
  absl::flat_hash_map<std::string, int> sparse_index;
  for (const InputDef& in : model.inputs()) {
    if (in.has_sparse()) {
      const int next = static_cast<int>(sparse_index.size());
      sparse_index[in.name()] = next;
    }
  }
  std::vector<float> pooled;
  for (const LayerDef& layer : model.layers()) {
    if (!layer.has_embedding_bag()) continue;
    predictor.PoolEmbeddings(layer, sparse_index, batch, b, &pooled);
    absl::StrAppend(line, ",\"",
                    layer.output().empty() ? layer.name() : layer.output(),
                    "\":[");
    for (size_t k = 0; k < pooled.size(); ++k) {
      if (k > 0) *line += ',';
      AppendFloat(pooled[k], line);
    }
    *line += ']';
  }
  *line += "}\n";
}

}  // namespace tessera
