#include "worker/nn/graph.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/initializer.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "worker/cpu_backend.h"
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
  ASSERT_EQ(values.size(), (*graph)->variables().size());

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
          << "gradient of " << (*graph)->variables()[i].name << " at step "
          << step;
    }
    for (size_t i = 0; i < values.size(); ++i) {
      for (size_t j = 0; j < values[i].size(); ++j) {
        values[i][j] -= 0.1f * ga[i][j];
      }
    }
  }
}

// Checks every parameter's gradient of the description `text` against
// central differences of the mean loss, on random inputs and labels.
void ExpectGradientsMatchDifferences(const std::string& text, int stride) {
  absl::StatusOr<ModelGraph> described = BuildModelGraph(Parse(text), 3);
  ASSERT_TRUE(described.ok()) << described.status();
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<std::vector<float>> values = InitialValues((*graph)->variables());
  const int64_t batch = 3;
  const ModelDef& m = described->resolved;
  std::vector<std::vector<float>> inputs;
  for (int i = 0; i < m.inputs_size(); ++i) {
    inputs.push_back(Random(
        batch * NumElements(described->tensors.at(m.inputs(i).name()).shape),
        11 + i));
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
  in.class_labels = classes;
  in.labels = labels;
  std::vector<std::vector<float>> grads;
  for (const auto& v : values) grads.emplace_back(v.size());
  ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
  ASSERT_TRUE((*graph)->TrainStep(in, 0, Views(grads)).ok());
  auto loss = [&]() {
    EXPECT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
    return (*graph)->Evaluate(in)->loss_sum / batch;
  };
  int checked = 0;
  for (size_t v = 0; v < values.size(); ++v) {
    for (size_t j = 0; j < values[v].size(); j += stride) {
      const float keep = values[v][j];
      const float h = 1e-3f;
      values[v][j] = keep + h;
      const double up = loss();
      values[v][j] = keep - h;
      const double down = loss();
      values[v][j] = keep;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(grads[v][j], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << (*graph)->variables()[v].name << "[" << j << "]";
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

TEST(GraphTest, LayersNotYetRunAreNamed) {
  absl::StatusOr<ModelGraph> described =
      BuildModelGraph(Parse(R"pb(
                        inputs {
                          name: "x"
                          dense { shape: [ 4 ] }
                        }
                        label { kind: REAL }
                        layers {
                          name: "n"
                          inputs: "x"
                          batch_norm {}
                        }
                        layers {
                          name: "out"
                          inputs: "n"
                          dense { units: 1 }
                        }
                        loss { kind: MEAN_SQUARED_ERROR input: "out" }
                      )pb"),
                      1);
  ASSERT_TRUE(described.ok()) << described.status();
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(graph.status().message(), HasSubstr("batch_norm"));
}

}  // namespace
}  // namespace tessera
