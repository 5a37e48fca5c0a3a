#include "tools/evaluate/model_evaluation.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <vector>

#include "common/binary_metrics.h"
#include "tools/predict/predictor.h"

namespace tessera {

absl::StatusOr<ModelMetrics> EvaluateModel(const TrainedModel& model,
                                           const ExampleSet& examples,
                                           int64_t batch, Backend* backend) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Predictor>> predictor =
      Predictor::Create(model, backend);
  if (!predictor.ok()) return predictor.status();
  const bool binary =
      model.model.label().kind() == LabelDef::BINARY &&
      (*predictor)->output_size() == 1 &&
      model.model.loss().kind() == LossDef::SIGMOID_CROSS_ENTROPY;
  HostBatch host;
  std::vector<int64_t> indices;
  std::vector<float> outputs, probabilities, labels;
  ModelMetrics m;
  double loss = 0;
  int64_t correct = 0;
  batch = std::max<int64_t>(1, batch);
  for (int64_t at = 0; at < examples.size(); at += batch) {
    const int64_t n = std::min(batch, examples.size() - at);
    indices.resize(n);
    std::iota(indices.begin(), indices.end(), at);
    if (absl::Status s = examples.Gather(indices, &host); !s.ok()) return s;
    absl::StatusOr<GraphResult> r = (*predictor)->Predict(host, &outputs);
    if (!r.ok()) return r.status();
    loss += r->loss_sum;
    correct += r->correct;
    if (binary) {
      probabilities.insert(probabilities.end(), outputs.begin(), outputs.end());
      labels.insert(labels.end(), host.labels.begin(), host.labels.end());
    }
  }
  m.examples = examples.size();
  const int64_t total = std::max<int64_t>(1, m.examples);
  m.loss = loss / total;
  m.accuracy = static_cast<double>(correct) / total;
  if (binary && !probabilities.empty()) {
    absl::StatusOr<double> auc = RocAuc(probabilities, labels);
    if (auc.ok()) m.auc = *auc;
    absl::StatusOr<double> log_loss = LogLoss(probabilities, labels);
    if (log_loss.ok()) m.log_loss = *log_loss;
  }
  m.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return m;
}

}  // namespace tessera
