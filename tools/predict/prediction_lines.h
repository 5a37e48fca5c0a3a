// The lines tessera_predict writes: one per example, as JSON lines or
// CSV, and (--write_inputs) the example as an exported ONNX model's inputs.
// Floats print with 9 significant digits, so reading one back gives the
// same float.
#ifndef TESSERA_TOOLS_PREDICT_PREDICTION_LINES_H_
#define TESSERA_TOOLS_PREDICT_PREDICTION_LINES_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "data/example_set.h"
#include "proto/model.pb.h"
#include "tools/predict/predictor.h"

namespace tessera {

enum class PredictionFormat { kJsonLines, kCsv };

// Whether outputs are class scores (softmax or sigmoid heads: written as
// "probabilities" with a predicted "class") or a regression's values
// ("predictions").
struct PredictionLayout {
  PredictionFormat format = PredictionFormat::kJsonLines;
  bool classes = true;
  int64_t width = 1;  // values per example
};

// The CSV header line ("index,p0,...,class"); "" for JSON lines.
std::string PredictionHeader(const PredictionLayout& layout);

// What tessera_predict prints of labeled examples: "  loss L  accuracy A"
// for class scores; a regression's loss is its mean squared error and it
// has no accuracy: "  loss (MSE) L".
std::string LabeledMetrics(const PredictionLayout& layout, double mean_loss,
                           double accuracy);

// Appends example `index`'s line for its `width` output values:
//   {"index":0,"probabilities":[0.01,...],"class":3}   or   0,0.01,...,3
// The class is the largest score's, or score >= 0.5 for a single one.
void AppendPrediction(const PredictionLayout& layout, int64_t index,
                      absl::Span<const float> values, std::string* line);

// Appends example `b` of `batch` (example `index` of the set) as one JSON
// line of the ONNX model's inputs (tools/export/onnx_export.h): {"index",
// "label" (when the batch has labels), each dense input's floats by name, each
// embedding_bag layer's ids as "<its output>_ids" ([fields][hotness], padded
// with -1 to the fields' largest max_hotness or the example's longest bag),
// each embedding_bag layer's output by name (its pooled embeddings, the inputs
// of an export with pooled inputs)}.
void AppendOnnxInputs(const ModelDef& model, const HostBatch& batch, int64_t b,
                      int64_t index, const Predictor& predictor,
                      std::string* line);

}  // namespace tessera

#endif  // TESSERA_TOOLS_PREDICT_PREDICTION_LINES_H_
