// Helpers of the layer graph's tests: parsing a description, initial
// values, and random batches of any description's inputs.

#ifndef TESSERA_TESTS_WORKER_NN_GRAPH_TEST_UTIL_H_
#define TESSERA_TESTS_WORKER_NN_GRAPH_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/initializer.h"
#include "common/model/model_graph.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "worker/nn/graph.h"

namespace tessera {

inline ModelDef Parse(const std::string& text) {
  ModelDef model;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &model));
  return model;
}

inline std::vector<std::vector<float>> InitialValues(
    const std::vector<VariableDef>& vars) {
  std::vector<std::vector<float>> values;
  for (const VariableDef& v : vars) {
    int64_t n = 1;
    for (int64_t d : v.shape) n *= d;
    values.emplace_back(n);
    FillInitialValues(v.initializer, 0, absl::MakeSpan(values.back()));
  }
  return values;
}

inline std::vector<absl::Span<const float>> ConstViews(
    const std::vector<std::vector<float>>& v) {
  return {v.begin(), v.end()};
}

inline std::vector<absl::Span<float>> Views(
    std::vector<std::vector<float>>& v) {
  return {v.begin(), v.end()};
}

inline std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(n);
  for (float& v : x) v = u(rng);
  return x;
}

// A batch of random inputs (bags of 0 to 3 ids, an empty one included),
// table rows and labels, with its graph view.
struct RandomGraphBatch {
  std::vector<std::vector<float>> inputs, rows;
  std::vector<std::vector<int64_t>> offsets, positions;
  std::vector<int32_t> classes;
  std::vector<float> labels;
  GraphBatch view;
};

inline void MakeRandomBatch(const ModelGraph& described, const Graph& graph,
                            int64_t batch, int64_t table_rows,
                            RandomGraphBatch* out) {
  const ModelDef& m = described.resolved;
  std::mt19937 rng(5);
  for (int i = 0; i < m.inputs_size(); ++i) {
    if (m.inputs(i).has_sparse()) {
      out->offsets.push_back({0});
      for (int64_t b = 0; b < batch; ++b) {
        out->offsets.back().push_back(out->offsets.back().back() + (b + i) % 4);
      }
      continue;
    }
    out->inputs.push_back(Random(
        batch * NumElements(described.tensors.at(m.inputs(i).name()).shape),
        11 + i));
  }
  for (size_t t = 0; t < graph.tables().size(); ++t) {
    const int64_t dim = graph.tables()[t].shape[1];
    out->rows.push_back(Random(table_rows * dim, 30 + t));
    out->positions.emplace_back();
    for (int input : graph.table_reads(t)) {
      for (int64_t j = 0; j < out->offsets[input].back(); ++j) {
        out->positions.back().push_back(rng() % table_rows);
      }
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    out->classes.push_back(
        static_cast<int32_t>(b % std::max(1, m.label().num_classes())));
    out->labels.push_back(m.label().kind() == LabelDef::BINARY ? b % 2
                                                               : 0.3f * b);
  }
  GraphBatch& in = out->view;
  in.size = batch;
  for (const auto& v : out->inputs) in.dense.push_back(v);
  for (const auto& v : out->offsets) in.sparse_offsets.push_back(v);
  for (const auto& v : out->rows) in.table_rows.push_back(v);
  for (const auto& v : out->positions) in.table_positions.push_back(v);
  in.class_labels = out->classes;
  in.labels = out->labels;
}

}  // namespace tessera

#endif  // TESSERA_TESTS_WORKER_NN_GRAPH_TEST_UTIL_H_
