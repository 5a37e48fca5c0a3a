#include "worker/nn/graph.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/initializer.h"
#include "common/model/model_presets.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "worker/cpu_backend.h"
#include "worker/ctr_model.h"
#include "worker/mlp_model.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

ModelDef Parse(const std::string& text) {
  ModelDef model;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &model));
  return model;
}

std::vector<std::vector<float>> InitialValues(
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

std::vector<absl::Span<const float>> ConstViews(
    const std::vector<std::vector<float>>& v) {
  return {v.begin(), v.end()};
}

std::vector<absl::Span<float>> Views(std::vector<std::vector<float>>& v) {
  return {v.begin(), v.end()};
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(n);
  for (float& v : x) v = u(rng);
  return x;
}

constexpr char kMlp[] = R"pb(
  inputs {
    name: "image"
    dense { shape: [ 20 ] }
  }
  label { kind: CLASS_INDEX num_classes: 5 }
  layers {
    name: "dense_0"
    inputs: "image"
    dense { units: 16 activation: RELU }
  }
  layers {
    name: "dropout_0"
    inputs: "dense_0"
    dropout { rate: 0.3 }
  }
  layers {
    name: "dense_1"
    inputs: "dropout_0"
    dense { units: 8 activation: RELU }
  }
  layers {
    name: "dropout_1"
    inputs: "dense_1"
    dropout { rate: 0.3 }
  }
  layers {
    name: "dense_2"
    inputs: "dropout_1"
    dense { units: 5 }
  }
  loss { kind: SOFTMAX_CROSS_ENTROPY input: "dense_2" }
)pb";

// The golden test: for fixed seeds the graph of the MLP's description
// computes bit for bit what MlpModel computes, step after step.
TEST(GraphTest, MlpGraphIsBitIdenticalToMlpModel) {
  ModelConfig preset;
  preset.set_kind("mlp");
  preset.set_input_dim(20);
  preset.add_hidden_units(16);
  preset.add_hidden_units(8);
  preset.set_num_classes(5);
  preset.set_dropout(0.3f);
  CpuBackend cpu_a, cpu_b;
  absl::StatusOr<std::unique_ptr<MlpModel>> old =
      MlpModel::Create(preset, &cpu_a);
  ASSERT_TRUE(old.ok());
  absl::StatusOr<ModelGraph> described = BuildModelGraph(Parse(kMlp), 42);
  ASSERT_TRUE(described.ok()) << described.status();
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu_b);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::vector<VariableDef>> preset_vars =
      ModelVariables(preset, 42);
  ASSERT_TRUE(preset_vars.ok());
  std::vector<std::vector<float>> values = InitialValues(*preset_vars);
  ASSERT_EQ(values.size(), (*graph)->dense_variables().size());

  const int64_t batch = 32;
  for (int step = 0; step < 5; ++step) {
    std::vector<float> x = Random(batch * 20, step);
    std::vector<int32_t> y(batch);
    for (int64_t b = 0; b < batch; ++b) y[b] = (b * 7 + step) % 5;
    std::vector<std::vector<float>> ga, gb;
    for (const auto& v : values) {
      ga.emplace_back(v.size());
      gb.emplace_back(v.size());
    }
    ASSERT_TRUE((*old)->SetParameters(ConstViews(values)).ok());
    ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
    absl::StatusOr<BatchResult> a =
        (*old)->TrainStep(x, y, /*seed=*/1000 + step, Views(ga));
    GraphBatch in;
    in.size = batch;
    in.dense = {x};
    in.class_labels = y;
    absl::StatusOr<GraphResult> b =
        (*graph)->TrainStep(in, /*seed=*/1000 + step, Views(gb));
    ASSERT_TRUE(a.ok() && b.ok()) << b.status();
    EXPECT_EQ(a->loss_sum, b->loss_sum) << "step " << step;
    EXPECT_EQ(a->correct, b->correct);
    for (size_t i = 0; i < ga.size(); ++i) {
      ASSERT_EQ(
          std::memcmp(ga[i].data(), gb[i].data(), ga[i].size() * sizeof(float)),
          0)
          << "gradient of " << (*graph)->dense_variables()[i].name
          << " at step " << step;
    }
    for (size_t i = 0; i < values.size(); ++i) {
      for (size_t j = 0; j < values[i].size(); ++j) {
        values[i][j] -= 0.1f * ga[i][j];
      }
    }
  }
}

// Checks every parameter's gradient of the description `text` against
// central differences of the mean training loss (the same seed each time),
// on random inputs, bags and labels; tables get `table_rows` rows per
// batch. Variables with an update rule (moving statistics) are not
// gradients and are skipped.
void ExpectGradientsMatchDifferences(const std::string& text, int stride,
                                     int64_t table_rows = 5) {
  absl::StatusOr<ModelGraph> described = BuildModelGraph(Parse(text), 3);
  ASSERT_TRUE(described.ok()) << described.status();
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<std::vector<float>> values =
      InitialValues((*graph)->dense_variables());
  const int64_t batch = 3;
  const ModelDef& m = described->resolved;
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<int64_t>> offsets;
  std::mt19937 rng(5);
  for (int i = 0; i < m.inputs_size(); ++i) {
    if (m.inputs(i).has_sparse()) {
      // Bags of 0 to 3 ids, an empty bag included.
      offsets.push_back({0});
      for (int64_t b = 0; b < batch; ++b) {
        offsets.back().push_back(offsets.back().back() + (b + i) % 4);
      }
      continue;
    }
    inputs.push_back(Random(
        batch * NumElements(described->tensors.at(m.inputs(i).name()).shape),
        11 + i));
  }
  std::vector<std::vector<float>> rows;
  std::vector<std::vector<int64_t>> positions;
  for (size_t t = 0; t < (*graph)->tables().size(); ++t) {
    const int64_t dim = (*graph)->tables()[t].shape[1];
    rows.push_back(Random(table_rows * dim, 30 + t));
    positions.emplace_back();
    for (int input : (*graph)->table_reads(t)) {
      for (int64_t j = 0; j < offsets[input].back(); ++j) {
        positions.back().push_back(rng() % table_rows);
      }
    }
  }
  std::vector<int32_t> classes;
  std::vector<float> labels;
  for (int64_t b = 0; b < batch; ++b) {
    classes.push_back(
        static_cast<int32_t>(b % std::max(1, m.label().num_classes())));
    labels.push_back(m.label().kind() == LabelDef::BINARY ? b % 2 : 0.3f * b);
  }
  GraphBatch in;
  in.size = batch;
  for (const auto& v : inputs) in.dense.push_back(v);
  for (const auto& v : offsets) in.sparse_offsets.push_back(v);
  for (const auto& v : rows) in.table_rows.push_back(v);
  for (const auto& v : positions) in.table_positions.push_back(v);
  in.class_labels = classes;
  in.labels = labels;
  std::vector<std::vector<float>> grads, scratch;
  for (const auto& v : values) {
    grads.emplace_back(v.size());
    scratch.emplace_back(v.size());
  }
  std::vector<TableGradient> table_grads, table_scratch;
  ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
  absl::StatusOr<GraphResult> trained =
      (*graph)->TrainStep(in, 0, Views(grads), &table_grads);
  ASSERT_TRUE(trained.ok()) << trained.status();
  auto loss = [&]() {
    EXPECT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
    return (*graph)
               ->TrainStep(in, 0, Views(scratch), &table_scratch)
               ->loss_sum /
           batch;
  };
  auto expect_near = [](double analytic, double numeric,
                        const std::string& what) {
    EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << what;
  };
  const float h = 1e-3f;
  int checked = 0;
  for (size_t v = 0; v < values.size(); ++v) {
    if ((*graph)->dense_variables()[v].update_rule.has_value()) continue;
    for (size_t j = 0; j < values[v].size(); j += stride) {
      const float keep = values[v][j];
      values[v][j] = keep + h;
      const double up = loss();
      values[v][j] = keep - h;
      const double down = loss();
      values[v][j] = keep;
      expect_near(
          grads[v][j], (up - down) / (2 * h),
          absl::StrCat((*graph)->dense_variables()[v].name, "[", j, "]"));
      ++checked;
    }
  }
  for (size_t t = 0; t < rows.size(); ++t) {
    const int64_t dim = (*graph)->tables()[t].shape[1];
    std::vector<float> dense_grad(rows[t].size(), 0.0f);
    const TableGradient& g = table_grads[t];
    for (size_t k = 0; k < g.rows.size(); ++k) {
      if (k > 0) EXPECT_LT(g.rows[k - 1], g.rows[k]) << "rows ascend";
      for (int64_t c = 0; c < dim; ++c) {
        dense_grad[g.rows[k] * dim + c] = g.values[k * dim + c];
      }
    }
    for (size_t j = 0; j < rows[t].size(); ++j) {
      const float keep = rows[t][j];
      rows[t][j] = keep + h;
      const double up = loss();
      rows[t][j] = keep - h;
      const double down = loss();
      rows[t][j] = keep;
      expect_near(dense_grad[j], (up - down) / (2 * h),
                  absl::StrCat("table ", (*graph)->tables()[t].name, " row ",
                               j / dim, " column ", j % dim));
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

// Each activation, two inputs of one Dense, and a tensor read three times
// (its gradient summed over its readers).
TEST(GraphTest, DenseStackGradients) {
  ExpectGradientsMatchDifferences(
      R"pb(
        inputs {
          name: "x"
          dense { shape: [ 2, 3 ] }
        }
        label { kind: CLASS_INDEX num_classes: 3 }
        layers {
          name: "flat"
          inputs: "x"
          flatten {}
        }
        layers {
          name: "a"
          inputs: "flat"
          dense { units: 5 activation: TANH }
        }
        layers {
          name: "b"
          inputs: "a"
          dense { units: 4 activation: SIGMOID }
        }
        layers {
          name: "c"
          inputs: "a"
          dense { units: 4 activation: RELU }
        }
        layers {
          name: "s"
          inputs: "c"
          activation { activation: SOFTMAX }
        }
        layers {
          name: "r"
          inputs: "s"
          reshape { shape: [ 2, -1 ] }
        }
        layers {
          name: "rf"
          inputs: "r"
          flatten {}
        }
        layers {
          name: "out"
          inputs: [ "b", "rf", "a" ]
          dense { units: 3 }
        }
        loss { kind: SOFTMAX_CROSS_ENTROPY input: "out" }
      )pb",
      1);
}

TEST(GraphTest, ConvolutionAndPoolingGradients) {
  ExpectGradientsMatchDifferences(
      R"pb(
        inputs {
          name: "img"
          dense { shape: [ 7, 6, 2 ] }
        }
        label { kind: CLASS_INDEX num_classes: 3 }
        layers {
          name: "c1"
          inputs: "img"
          conv2d {
            filters: 3
            kernel_size: 3
            padding: SAME
            strides: 2
            activation: TANH
          }
        }
        layers {
          name: "c2"
          inputs: "img"
          conv2d {
            filters: 2
            kernel_size: [ 2, 3 ]
          }
        }
        layers {
          name: "p"
          inputs: "c2"
          max_pool2d { pool_size: 2 padding: SAME }
        }
        layers {
          name: "f1"
          inputs: "c1"
          flatten {}
        }
        layers {
          name: "c3"
          inputs: "p"
          conv2d { filters: 2 kernel_size: 2 padding: SAME activation: RELU }
        }
        layers {
          name: "f2"
          inputs: "c3"
          flatten {}
        }
        layers {
          name: "out"
          inputs: [ "f1", "f2" ]
          dense { units: 3 }
        }
        loss { kind: SOFTMAX_CROSS_ENTROPY input: "out" }
      )pb",
      2);
}

TEST(GraphTest, ConcatAddMultiplyAndLayerNormGradients) {
  ExpectGradientsMatchDifferences(
      R"pb(
        inputs {
          name: "x"
          dense { shape: [ 2, 3 ] }
        }
        inputs {
          name: "y"
          dense { shape: [ 2, 2 ] }
        }
        label { kind: BINARY }
        layers {
          name: "cat"
          inputs: [ "x", "y" ]
          concat {}
        }
        layers {
          name: "n"
          inputs: "cat"
          layer_norm {}
        }
        layers {
          name: "flat"
          inputs: "n"
          flatten {}
        }
        layers {
          name: "a"
          inputs: "flat"
          dense { units: 4 activation: SIGMOID }
        }
        layers {
          name: "b"
          inputs: "flat"
          dense { units: 4 }
        }
        layers {
          name: "sum"
          inputs: [ "a", "b", "a" ]
          add {}
        }
        layers {
          name: "prod"
          inputs: [ "sum", "b" ]
          multiply {}
        }
        layers {
          name: "rows"
          inputs: [ "x", "x" ]
          concat { axis: 0 }
        }
        layers {
          name: "rf"
          inputs: "rows"
          flatten {}
        }
        layers {
          name: "out"
          inputs: [ "prod", "rf" ]
          dense { units: 1 }
        }
        loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
      )pb",
      1);
}

TEST(GraphTest, MeanSquaredErrorGradients) {
  ExpectGradientsMatchDifferences(
      R"pb(
        inputs {
          name: "x"
          dense { shape: [ 5 ] }
        }
        label { kind: REAL }
        layers {
          name: "h"
          inputs: "x"
          dense { units: 4 activation: TANH }
        }
        layers {
          name: "out"
          inputs: "h"
          dense { units: 1 }
        }
        loss { kind: MEAN_SQUARED_ERROR input: "out" }
      )pb",
      1);
}

TEST(GraphTest, DotInteractionAndFmOrder2Gradients) {
  ExpectGradientsMatchDifferences(
      R"pb(
        inputs {
          name: "x"
          dense { shape: [ 6 ] }
        }
        inputs {
          name: "v"
          dense { shape: [ 3, 4 ] }
        }
        label { kind: BINARY }
        layers {
          name: "bottom"
          inputs: "x"
          dense { units: 4 activation: TANH }
        }
        layers {
          name: "dots"
          inputs: [ "bottom", "v" ]
          dot_interaction { concat_first_input: true }
        }
        layers {
          name: "selfdots"
          inputs: [ "v", "bottom" ]
          dot_interaction { self_interaction: true }
        }
        layers {
          name: "fm"
          inputs: [ "v", "bottom" ]
          fm_order2 {}
        }
        layers {
          name: "out"
          inputs: [ "dots", "selfdots", "fm" ]
          dense { units: 1 }
        }
        loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
      )pb",
      1);
}

// The pair order DotInteraction documents: (1,0), (2,0), (2,1).
TEST(GraphTest, DotInteractionPairOrder) {
  absl::StatusOr<ModelGraph> described =
      BuildModelGraph(Parse(R"pb(
                        inputs {
                          name: "v"
                          dense { shape: [ 3, 2 ] }
                        }
                        label { kind: REAL }
                        layers {
                          name: "dots"
                          inputs: "v"
                          dot_interaction {}
                        }
                        layers {
                          name: "out"
                          inputs: "dots"
                          dense { units: 1 }
                        }
                        loss { kind: MEAN_SQUARED_ERROR input: "out" }
                      )pb"),
                      1);
  ASSERT_TRUE(described.ok()) << described.status();
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu);
  ASSERT_TRUE(graph.ok()) << graph.status();
  // out = dots * kernel with a kernel of (1, 10, 100): reads the pairs.
  std::vector<std::vector<float>> values = {{1, 10, 100}, {0}};
  ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
  const std::vector<float> v = {1, 0, 0, 2, 3, 4};  // vectors a, b, c
  // (b.a, c.a, c.b) = (0, 3, 8): prediction 0 + 30 + 800; the MSE against
  // a label of 0 is its square.
  const std::vector<float> label = {0};
  GraphBatch in;
  in.size = 1;
  in.dense = {v};
  in.labels = label;
  absl::StatusOr<GraphResult> r = (*graph)->Evaluate(in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->loss_sum, 830.0 * 830.0);
}

TEST(GraphTest, CrossNetworkGradients) {
  ExpectGradientsMatchDifferences(
      R"pb(
        inputs {
          name: "x"
          dense { shape: [ 5 ] }
        }
        label { kind: BINARY }
        layers {
          name: "h"
          inputs: "x"
          dense { units: 4 activation: TANH }
        }
        layers {
          name: "full"
          inputs: "h"
          cross { num_layers: 2 }
        }
        layers {
          name: "low"
          inputs: "h"
          cross { num_layers: 2 projection_dim: 2 }
        }
        layers {
          name: "v1"
          inputs: "h"
          cross { num_layers: 3 version: V1 }
        }
        layers {
          name: "out"
          inputs: [ "full", "low", "v1" ]
          dense { units: 1 }
        }
        loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
      )pb",
      1);
}

TEST(GraphTest, BadBatchesAreRefusedByName) {
  absl::StatusOr<ModelGraph> described = BuildModelGraph(Parse(kMlp), 1);
  ASSERT_TRUE(described.ok());
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu);
  ASSERT_TRUE(graph.ok());
  std::vector<float> x(3 * 20);
  std::vector<int32_t> y = {0, 1, 5};
  GraphBatch in;
  in.size = 3;
  in.dense = {x};
  in.class_labels = y;
  absl::StatusOr<GraphResult> r = (*graph)->Evaluate(in);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("label 5 of batch row 2"));
  y[2] = 1;
  in.dense = {absl::MakeConstSpan(x).subspan(1)};
  r = (*graph)->Evaluate(in);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("input \"image\" has 59 values"));
}

// Sum and mean bags, one table read by two fields, and one field read by
// two tables (DeepFM's linear and factor terms), into Dense and FmOrder2.
TEST(GraphTest, EmbeddingBagGradients) {
  ExpectGradientsMatchDifferences(
      R"pb(
        inputs {
          name: "a"
          sparse { max_hotness: 3 vocab_size: 10 }
        }
        inputs {
          name: "b"
          sparse { max_hotness: 3 vocab_size: 10 }
        }
        inputs {
          name: "x"
          dense { shape: [ 2 ] }
        }
        label { kind: BINARY }
        layers {
          name: "ea"
          inputs: "a"
          embedding_bag { table: "shared" dim: 3 }
        }
        layers {
          name: "eb"
          inputs: "b"
          embedding_bag { table: "shared" dim: 3 combiner: MEAN }
        }
        layers {
          name: "wb"
          inputs: "b"
          embedding_bag { table: "linear" dim: 1 }
        }
        layers {
          name: "fm"
          inputs: [ "ea", "eb" ]
          fm_order2 {}
        }
        layers {
          name: "out"
          inputs: [ "ea", "eb", "wb", "fm", "x" ]
          dense { units: 1 }
        }
        loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
      )pb",
      1);
}

constexpr char kBatchNorm[] = R"pb(
  inputs {
    name: "x"
    dense { shape: [ 6 ] }
  }
  label { kind: REAL }
  layers {
    name: "h"
    inputs: "x"
    dense { units: 8 activation: TANH }
  }
  layers {
    name: "r"
    inputs: "h"
    reshape { shape: [ 2, 4 ] }
  }
  layers {
    name: "n"
    inputs: "r"
    batch_norm {}
  }
  layers {
    name: "f"
    inputs: "n"
    flatten {}
  }
  layers {
    name: "out"
    inputs: "f"
    dense { units: 1 }
  }
  loss { kind: MEAN_SQUARED_ERROR input: "out" }
)pb";

TEST(GraphTest, BatchNormGradients) {
  ExpectGradientsMatchDifferences(kBatchNorm, 1);
}

// Training normalises with the batch's moments and hands them back as the
// moving statistics' pushed values; evaluation uses the moving statistics.
TEST(GraphTest, BatchNormPushesBatchMomentsAndEvaluatesWithMovingOnes) {
  absl::StatusOr<ModelGraph> described = BuildModelGraph(Parse(kBatchNorm), 1);
  ASSERT_TRUE(described.ok()) << described.status();
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<VariableDef>& vars = (*graph)->dense_variables();
  int mean = -1, var = -1;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i].name == "n/moving_mean") mean = static_cast<int>(i);
    if (vars[i].name == "n/moving_variance") var = static_cast<int>(i);
  }
  ASSERT_GE(mean, 0);
  ASSERT_GE(var, 0);
  ASSERT_TRUE(vars[mean].update_rule.has_value());
  EXPECT_FLOAT_EQ(vars[mean].update_rule->moving_average().momentum(), 0.99f);
  // A kernel of ones and a zero bias make every unit of example b
  // tanh(x_b0 + ... + x_b5).
  std::vector<std::vector<float>> values = InitialValues(vars);
  for (float& w : values[0]) w = 1.0f;
  const int64_t batch = 4;
  std::vector<float> x = Random(batch * 6, 9);
  std::vector<float> y(batch, 0.5f);
  GraphBatch in;
  in.size = batch;
  in.dense = {x};
  in.labels = y;
  std::vector<std::vector<float>> grads;
  for (const auto& v : values) grads.emplace_back(v.size());
  ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
  ASSERT_TRUE((*graph)->TrainStep(in, 0, Views(grads)).ok());
  // The moments over the batch's 8 rows of [2, 4] (per channel).
  std::vector<double> sum(4, 0), sq(4, 0);
  for (int64_t r = 0; r < batch * 2; ++r) {
    const float* xb = x.data() + (r / 2) * 6;
    const float h = std::tanh(xb[0] + xb[1] + xb[2] + xb[3] + xb[4] + xb[5]);
    for (int c = 0; c < 4; ++c) {
      sum[c] += h;
      sq[c] += double{h} * h;
    }
  }
  for (int c = 0; c < 4; ++c) {
    const double m = sum[c] / (batch * 2);
    EXPECT_NEAR(grads[mean][c], m, 1e-5);
    EXPECT_NEAR(grads[var][c], sq[c] / (batch * 2) - m * m, 1e-5);
  }
  // With moving mean 0 and variance 1 (their initial values), evaluation
  // normalises by sqrt(1 + epsilon) only: a different loss than training's.
  absl::StatusOr<GraphResult> eval = (*graph)->Evaluate(in);
  ASSERT_TRUE(eval.ok());
  values[mean] = grads[mean];
  values[var] = grads[var];
  ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
  absl::StatusOr<GraphResult> moved = (*graph)->Evaluate(in);
  absl::StatusOr<GraphResult> trained =
      (*graph)->TrainStep(in, 0, Views(grads));
  ASSERT_TRUE(moved.ok() && trained.ok());
  EXPECT_NE(eval->loss_sum, moved->loss_sum);
  // Moving statistics equal to the batch's give training's loss.
  EXPECT_NEAR(moved->loss_sum, trained->loss_sum, 1e-5);
}

// The golden test of the click model: the ctr preset's description, run by
// the graph, computes bit for bit what CtrModel computes (loss, dense and
// table gradients), step after step, with multi-hot and empty bags.
TEST(GraphTest, CtrPresetIsBitIdenticalToCtrModel) {
  ModelConfig preset;
  preset.set_kind("ctr");
  preset.set_embedding_dim(4);
  preset.set_num_fields(3);
  preset.set_num_dense(5);
  preset.add_hidden_units(16);
  preset.add_hidden_units(8);
  preset.set_dropout(0.2f);
  for (const char* combiner : {"sum", "mean"}) {
    preset.set_combiner(combiner);
    CpuBackend cpu_a, cpu_b;
    absl::StatusOr<std::unique_ptr<CtrModel>> old =
        CtrModel::Create(preset, &cpu_a);
    ASSERT_TRUE(old.ok());
    absl::StatusOr<ModelDef> def = PresetModel(preset);
    ASSERT_TRUE(def.ok()) << def.status();
    absl::StatusOr<ModelGraph> described = BuildModelGraph(*def, 42);
    ASSERT_TRUE(described.ok()) << described.status();
    absl::StatusOr<std::vector<VariableDef>> preset_vars =
        ModelVariables(preset, 42);
    ASSERT_TRUE(preset_vars.ok());
    ASSERT_EQ(described->variables.size(), preset_vars->size());
    for (size_t i = 0; i < preset_vars->size(); ++i) {
      const VariableDef &a = (*preset_vars)[i], &b = described->variables[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.shape, b.shape) << a.name;
      EXPECT_EQ(a.sparse, b.sparse) << a.name;
      EXPECT_EQ(a.initializer.SerializeAsString(),
                b.initializer.SerializeAsString())
          << a.name;
    }
    absl::StatusOr<std::unique_ptr<Graph>> graph =
        Graph::Create(*described, &cpu_b);
    ASSERT_TRUE(graph.ok()) << graph.status();
    std::vector<std::vector<float>> values =
        InitialValues((*graph)->dense_variables());
    const int64_t batch = 16, table_rows = 7;
    std::mt19937 rng(3);
    for (int step = 0; step < 5; ++step) {
      std::vector<float> dense = Random(batch * 5, 100 + step);
      std::vector<float> labels(batch);
      for (int64_t b = 0; b < batch; ++b) labels[b] = (b * 3 + step) % 2;
      std::vector<std::vector<int64_t>> offsets(3), positions(3);
      std::vector<std::vector<float>> rows(3);
      std::vector<CtrFieldInput> fields(3);
      for (int f = 0; f < 3; ++f) {
        offsets[f] = {0};
        for (int64_t b = 0; b < batch; ++b) {
          offsets[f].push_back(offsets[f].back() + rng() % 4);
        }
        for (int64_t j = 0; j < offsets[f].back(); ++j) {
          positions[f].push_back(rng() % table_rows);
        }
        rows[f] = Random(table_rows * 4, 200 + 10 * step + f);
        fields[f] = {offsets[f], positions[f], rows[f]};
      }
      CtrModelInput old_in;
      old_in.batch = batch;
      old_in.labels = labels;
      old_in.dense = dense;
      old_in.fields = fields;
      GraphBatch in;
      in.size = batch;
      in.dense = {dense};
      in.labels = labels;
      for (int f = 0; f < 3; ++f) {
        in.sparse_offsets.push_back(offsets[f]);
        in.table_rows.push_back(rows[f]);
        in.table_positions.push_back(positions[f]);
      }
      std::vector<std::vector<float>> ga, gb;
      for (const auto& v : values) {
        ga.emplace_back(v.size());
        gb.emplace_back(v.size());
      }
      std::vector<CtrSparseGrad> sa;
      std::vector<TableGradient> sb;
      ASSERT_TRUE((*old)->SetDenseParameters(ConstViews(values)).ok());
      ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
      absl::StatusOr<CtrBatchResult> a =
          (*old)->TrainStep(old_in, 1000 + step, Views(ga), &sa);
      absl::StatusOr<GraphResult> b =
          (*graph)->TrainStep(in, 1000 + step, Views(gb), &sb);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
      EXPECT_EQ(a->loss_sum, b->loss_sum) << combiner << " step " << step;
      for (size_t i = 0; i < ga.size(); ++i) {
        ASSERT_EQ(std::memcmp(ga[i].data(), gb[i].data(),
                              ga[i].size() * sizeof(float)),
                  0)
            << "gradient of " << (*graph)->dense_variables()[i].name
            << " at step " << step;
      }
      for (int f = 0; f < 3; ++f) {
        EXPECT_EQ(sa[f].rows, sb[f].rows) << "field " << f;
        ASSERT_EQ(sa[f].values.size(), sb[f].values.size());
        EXPECT_EQ(std::memcmp(sa[f].values.data(), sb[f].values.data(),
                              sa[f].values.size() * sizeof(float)),
                  0)
            << "table gradient of field " << f << " at step " << step;
      }
      for (size_t i = 0; i < values.size(); ++i) {
        for (size_t j = 0; j < values[i].size(); ++j) {
          values[i][j] -= 0.1f * ga[i][j];
        }
      }
    }
  }
}

// The mlp preset's description is the MLP written by hand above.
TEST(GraphTest, MlpPresetIsTheHandWrittenDescription) {
  ModelConfig preset;
  preset.set_kind("mlp");
  preset.set_input_dim(20);
  preset.add_hidden_units(16);
  preset.add_hidden_units(8);
  preset.set_num_classes(5);
  preset.set_dropout(0.3f);
  absl::StatusOr<ModelDef> def = PresetModel(preset);
  ASSERT_TRUE(def.ok()) << def.status();
  absl::StatusOr<ModelGraph> a = BuildModelGraph(*def, 42);
  absl::StatusOr<ModelGraph> b = BuildModelGraph(Parse(kMlp), 42);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->order, b->order);
  ASSERT_EQ(a->variables.size(), b->variables.size());
  for (size_t i = 0; i < a->variables.size(); ++i) {
    EXPECT_EQ(a->variables[i].name, b->variables[i].name);
    EXPECT_EQ(a->variables[i].initializer.SerializeAsString(),
              b->variables[i].initializer.SerializeAsString());
  }
  EXPECT_EQ(a->resolved.layers_size(), b->resolved.layers_size());
}

}  // namespace
}  // namespace tessera
