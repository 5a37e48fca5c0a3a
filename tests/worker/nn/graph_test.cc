#include "worker/nn/graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
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
#include "tests/worker/nn/graph_test_util.h"
#include "tests/worker/nn/layer_test_models.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// The mlp preset of kMlp's shape: 20 -> 16 -> 8 -> 5, dropout 0.3.
ModelConfig SmallMlpPreset() {
  ModelConfig preset;
  preset.set_kind("mlp");
  preset.set_input_dim(20);
  preset.add_hidden_units(16);
  preset.add_hidden_units(8);
  preset.set_num_classes(5);
  preset.set_dropout(0.3f);
  return preset;
}

// The golden test of the MLP: the mlp preset's graph computes, step after
// step, the losses and gradients today's compiled MlpModel computed for
// the same seeds. The figures were recorded from MlpModel while both
// existed, when the graph matched it bit for bit (commit 495d0a3); the
// tolerance only absorbs a compiler's different rounding.
TEST(GraphTest, MlpPresetReproducesMlpModel) {
  absl::StatusOr<ModelDef> def = PresetModel(SmallMlpPreset());
  ASSERT_TRUE(def.ok()) << def.status();
  absl::StatusOr<ModelGraph> described = BuildModelGraph(*def, 42);
  ASSERT_TRUE(described.ok()) << described.status();
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<std::vector<float>> values =
      InitialValues((*graph)->dense_variables());
  // Per step: MlpModel's summed loss and the sum of all its gradients.
  const double kGolden[5][2] = {{57.83188079, 3.394383723},
                                {56.51605031, 1.838110916},
                                {48.2067236, -0.4049116876},
                                {52.58409845, 0.1515092311},
                                {53.70819366, 0.9987760348}};
  const int64_t batch = 32;
  for (int step = 0; step < 5; ++step) {
    std::vector<float> x = Random(batch * 20, step);
    std::vector<int32_t> y(batch);
    for (int64_t b = 0; b < batch; ++b) y[b] = (b * 7 + step) % 5;
    std::vector<std::vector<float>> grads;
    for (const auto& v : values) grads.emplace_back(v.size());
    ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
    GraphBatch in;
    in.size = batch;
    in.dense = {x};
    in.class_labels = y;
    absl::StatusOr<GraphResult> r =
        (*graph)->TrainStep(in, /*seed=*/1000 + step, Views(grads));
    ASSERT_TRUE(r.ok()) << r.status();
    double sum = 0;
    for (const auto& g : grads) {
      for (float v : g) sum += v;
    }
    EXPECT_NEAR(r->loss_sum, kGolden[step][0], 1e-6 * kGolden[step][0])
        << "step " << step;
    EXPECT_NEAR(sum, kGolden[step][1], 1e-5) << "step " << step;
    for (size_t i = 0; i < values.size(); ++i) {
      for (size_t j = 0; j < values[i].size(); ++j) {
        values[i][j] -= 0.1f * grads[i][j];
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
  RandomGraphBatch random;
  MakeRandomBatch(*described, **graph, batch, table_rows, &random);
  const GraphBatch& in = random.view;
  std::vector<std::vector<float>>& rows = random.rows;
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
  ExpectGradientsMatchDifferences(kDenseStackModel, 1);
}

// Dropout's mask is drawn from the step's seed, the same at every
// evaluation of the finite differences.
TEST(GraphTest, DropoutGradients) { ExpectGradientsMatchDifferences(kMlp, 3); }

TEST(GraphTest, ConvolutionAndPoolingGradients) {
  ExpectGradientsMatchDifferences(kConvolutionModel, 2);
}

TEST(GraphTest, ConcatAddMultiplyAndLayerNormGradients) {
  ExpectGradientsMatchDifferences(kMergeAndLayerNormModel, 1);
}

TEST(GraphTest, MeanSquaredErrorGradients) {
  ExpectGradientsMatchDifferences(kRegressionModel, 1);
}

TEST(GraphTest, DotInteractionAndFmOrder2Gradients) {
  ExpectGradientsMatchDifferences(kInteractionModel, 1);
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
  ExpectGradientsMatchDifferences(kCrossModel, 1);
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
  ExpectGradientsMatchDifferences(kEmbeddingModel, 1);
}

// A layer of several fields fills every field's column of its [n, dim]
// output (it once wrote only the first field's, leaving the rest of the
// tensor as it was).
TEST(GraphTest, MultiFieldEmbeddingBagGradients) {
  ExpectGradientsMatchDifferences(kMultiFieldEmbeddingModel, 1);
}

// One layer over fields a, b, c computes what three one-field layers on the
// same table, concatenated, compute: the same loss and the same gradients.
TEST(GraphTest, MultiFieldEmbeddingBagEqualsOneLayerPerField) {
  const std::string inputs = R"pb(
    inputs {
      name: "a"
      sparse { max_hotness: 3 vocab_size: 10 }
    }
    inputs {
      name: "b"
      sparse { max_hotness: 3 vocab_size: 10 }
    }
    inputs {
      name: "c"
      sparse { max_hotness: 3 vocab_size: 10 }
    }
    label { kind: BINARY }
    loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
  )pb";
  const std::string one_layer = inputs + R"pb(
    layers {
      name: "bags"
      inputs: [ "a", "b", "c" ]
      embedding_bag { table: "t" dim: 2 }
    }
    layers {
      name: "flat"
      inputs: "bags"
      flatten {}
    }
    layers {
      name: "out"
      inputs: "flat"
      dense { units: 1 }
    }
  )pb";
  const std::string per_field = inputs + R"pb(
    layers {
      name: "ba"
      inputs: "a"
      embedding_bag { table: "t" dim: 2 }
    }
    layers {
      name: "bb"
      inputs: "b"
      embedding_bag { table: "t" dim: 2 }
    }
    layers {
      name: "bc"
      inputs: "c"
      embedding_bag { table: "t" dim: 2 }
    }
    layers {
      name: "out"
      inputs: [ "ba", "bb", "bc" ]
      dense { units: 1 }
    }
  )pb";
  struct Run {
    double loss = 0;
    std::vector<std::vector<float>> grads;
    std::vector<TableGradient> tables;
  };
  auto run = [](const std::string& text) {
    Run r;
    absl::StatusOr<ModelGraph> described = BuildModelGraph(Parse(text), 3);
    EXPECT_TRUE(described.ok()) << described.status();
    CpuBackend cpu;
    absl::StatusOr<std::unique_ptr<Graph>> graph =
        Graph::Create(*described, &cpu);
    EXPECT_TRUE(graph.ok()) << graph.status();
    std::vector<std::vector<float>> values =
        InitialValues((*graph)->dense_variables());
    EXPECT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
    RandomGraphBatch random;
    MakeRandomBatch(*described, **graph, 5, 6, &random);
    for (const auto& v : values) r.grads.emplace_back(v.size(), -1.0f);
    absl::StatusOr<GraphResult> step =
        (*graph)->TrainStep(random.view, 0, Views(r.grads), &r.tables);
    EXPECT_TRUE(step.ok()) << step.status();
    r.loss = step->loss_sum;
    return r;
  };
  const Run one = run(one_layer), three = run(per_field);
  EXPECT_DOUBLE_EQ(one.loss, three.loss);
  EXPECT_EQ(one.grads, three.grads);
  ASSERT_EQ(one.tables.size(), 1u);
  ASSERT_EQ(three.tables.size(), 1u);
  EXPECT_EQ(one.tables[0].rows, three.tables[0].rows);
  EXPECT_EQ(one.tables[0].values, three.tables[0].values);
  EXPECT_FALSE(one.tables[0].rows.empty());
}

TEST(GraphTest, BatchNormGradients) {
  ExpectGradientsMatchDifferences(kBatchNormModel, 1);
}

// Training normalises with the batch's moments and hands them back as the
// moving statistics' pushed values; evaluation uses the moving statistics.
TEST(GraphTest, BatchNormPushesBatchMomentsAndEvaluatesWithMovingOnes) {
  absl::StatusOr<ModelGraph> described =
      BuildModelGraph(Parse(kBatchNormModel), 1);
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

// The mirrored device path's step: every dense gradient (a moving
// statistic's batch moment too) scaled and packed in variable order, the
// same bits as TrainStep's gradients scaled on the host; tables refused.
TEST(GraphTest, TrainStepOnDevicePacksScaledGradients) {
  for (const char* text : {kMlp, kBatchNormModel}) {
    absl::StatusOr<ModelGraph> described = BuildModelGraph(Parse(text), 3);
    ASSERT_TRUE(described.ok()) << described.status();
    CpuBackend cpu;
    absl::StatusOr<std::unique_ptr<Graph>> graph =
        Graph::Create(*described, &cpu);
    ASSERT_TRUE(graph.ok()) << graph.status();
    std::vector<std::vector<float>> values =
        InitialValues((*graph)->dense_variables());
    RandomGraphBatch batch;
    MakeRandomBatch(*described, **graph, 24, 10, &batch);
    ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
    std::vector<std::vector<float>> grads;
    for (const auto& v : values) grads.emplace_back(v.size());
    absl::StatusOr<GraphResult> host =
        (*graph)->TrainStep(batch.view, 5, Views(grads));
    ASSERT_TRUE(host.ok()) << host.status();
    std::vector<float> want;
    for (const auto& g : grads) {
      for (float x : g) want.push_back(x * 24.0f);
    }
    ASSERT_EQ((*graph)->dense_gradient_size(),
              static_cast<int64_t>(want.size()));
    std::vector<float> packed(want.size() + 1, -1.0f);
    absl::StatusOr<GraphResult> device =
        (*graph)->TrainStepOnDevice(batch.view, 5, 24.0f, packed.data());
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(device->loss_sum, host->loss_sum);
    EXPECT_EQ(packed.back(), -1.0f) << "wrote past the gradients";
    packed.pop_back();
    EXPECT_EQ(packed, want);
  }
  absl::StatusOr<ModelGraph> tables =
      BuildModelGraph(Parse(kEmbeddingModel), 3);
  ASSERT_TRUE(tables.ok());
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph = Graph::Create(*tables, &cpu);
  ASSERT_TRUE(graph.ok());
  RandomGraphBatch batch;
  MakeRandomBatch(*tables, **graph, 4, 10, &batch);
  std::vector<float> out((*graph)->dense_gradient_size());
  EXPECT_EQ((*graph)
                ->TrainStepOnDevice(batch.view, 5, 1.0f, out.data())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// The golden test of the click model: the ctr preset's graph computes,
// step after step, the losses and gradients (dense and table rows) today's
// compiled CtrModel computed, with multi-hot and empty bags, sum and mean.
// Recorded from CtrModel while both existed, when the graph matched it bit
// for bit (commit 495d0a3).
TEST(GraphTest, CtrPresetReproducesCtrModel) {
  ModelConfig preset;
  preset.set_kind("ctr");
  preset.set_embedding_dim(4);
  preset.set_num_fields(3);
  preset.set_num_dense(5);
  preset.add_hidden_units(16);
  preset.add_hidden_units(8);
  preset.set_dropout(0.2f);
  // Per combiner and step: CtrModel's summed loss, the sum of its dense
  // gradients and of its table gradients.
  const double kGolden[2][5][3] = {
      {{11.85445321, 1.081203827, -0.03684294299},
       {11.4363946, 0.5531560362, 0.1384275627},
       {11.92985538, 0.05057541438, -0.05229073751},
       {11.56366554, -0.03482841409, 0.1959321609},
       {11.66928127, -0.283103071, -0.04858707714}},
      {{11.46785569, 0.2467824132, 0.006105567625},
       {11.3058978, 0.2400923675, 0.06599640647},
       {11.89650977, 0.2464909031, -0.006317682137},
       {11.14629379, 0.198436523, 0.09665135137},
       {10.9266144, -0.5228176838, -0.01006003348}}};
  for (int c = 0; c < 2; ++c) {
    const char* combiner = c == 0 ? "sum" : "mean";
    preset.set_combiner(combiner);
    absl::StatusOr<ModelDef> def = PresetModel(preset);
    ASSERT_TRUE(def.ok()) << def.status();
    absl::StatusOr<ModelGraph> described = BuildModelGraph(*def, 42);
    ASSERT_TRUE(described.ok()) << described.status();
    // The variables of the compiled model: names, shapes, initializers.
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
    CpuBackend cpu;
    absl::StatusOr<std::unique_ptr<Graph>> graph =
        Graph::Create(*described, &cpu);
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
      GraphBatch in;
      in.size = batch;
      in.dense = {dense};
      in.labels = labels;
      for (int f = 0; f < 3; ++f) {
        offsets[f] = {0};
        for (int64_t b = 0; b < batch; ++b) {
          offsets[f].push_back(offsets[f].back() + rng() % 4);
        }
        for (int64_t j = 0; j < offsets[f].back(); ++j) {
          positions[f].push_back(rng() % table_rows);
        }
        rows[f] = Random(table_rows * 4, 200 + 10 * step + f);
        in.sparse_offsets.push_back(offsets[f]);
        in.table_rows.push_back(rows[f]);
        in.table_positions.push_back(positions[f]);
      }
      std::vector<std::vector<float>> grads;
      for (const auto& v : values) grads.emplace_back(v.size());
      std::vector<TableGradient> tables;
      ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
      absl::StatusOr<GraphResult> r =
          (*graph)->TrainStep(in, 1000 + step, Views(grads), &tables);
      ASSERT_TRUE(r.ok()) << r.status();
      double dense_sum = 0, table_sum = 0;
      for (const auto& g : grads) {
        for (float v : g) dense_sum += v;
      }
      for (const TableGradient& g : tables) {
        for (float v : g.values) table_sum += v;
      }
      const double* want = kGolden[c][step];
      EXPECT_NEAR(r->loss_sum, want[0], 1e-6 * want[0])
          << combiner << " step " << step;
      EXPECT_NEAR(dense_sum, want[1], 1e-5) << combiner << " step " << step;
      EXPECT_NEAR(table_sum, want[2], 1e-5) << combiner << " step " << step;
      for (size_t i = 0; i < values.size(); ++i) {
        for (size_t j = 0; j < values[i].size(); ++j) {
          values[i][j] -= 0.1f * grads[i][j];
        }
      }
    }
  }
}

// The mlp preset's description is the MLP written by hand above.
TEST(GraphTest, MlpPresetIsTheHandWrittenDescription) {
  absl::StatusOr<ModelDef> def = PresetModel(SmallMlpPreset());
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

namespace tessera {
namespace {

// On the CPU the graph's own parameter and gradient buffers are visible as
// host memory: values written there are the next step's parameters (and
// SetParameters of those spans changes nothing), and TrainStep leaves the
// same gradients there as it copies into buffers of the caller's.
TEST(GraphTest, HostVisibleBuffersServeAsTheParametersOnTheCpu) {
  absl::StatusOr<ModelGraph> described = BuildModelGraph(Parse(kMlp), 3);
  ASSERT_TRUE(described.ok()) << described.status();
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<absl::Span<float>> in_values = (*graph)->HostVisibleValues();
  std::vector<absl::Span<float>> in_grads = (*graph)->HostVisibleGradients();
  std::vector<std::vector<float>> values =
      InitialValues((*graph)->dense_variables());
  ASSERT_EQ(in_values.size(), values.size());
  ASSERT_EQ(in_grads.size(), values.size());
  RandomGraphBatch random;
  MakeRandomBatch(*described, **graph, 16, 10, &random);

  std::vector<std::vector<float>> want;
  for (const auto& v : values) want.emplace_back(v.size());
  ASSERT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
  absl::StatusOr<GraphResult> copied =
      (*graph)->TrainStep(random.view, 5, Views(want));
  ASSERT_TRUE(copied.ok()) << copied.status();

  // Scribble over the graph's buffers, then write the values in place.
  for (absl::Span<float> v : in_values) std::fill(v.begin(), v.end(), 9.0f);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(in_values[i].size(), values[i].size());
    std::copy(values[i].begin(), values[i].end(), in_values[i].begin());
  }
  std::vector<absl::Span<const float>> same(in_values.begin(), in_values.end());
  ASSERT_TRUE((*graph)->SetParameters(same).ok());
  absl::StatusOr<GraphResult> in_place =
      (*graph)->TrainStep(random.view, 5, in_grads);
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  EXPECT_EQ(in_place->loss_sum, copied->loss_sum);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(std::equal(want[i].begin(), want[i].end(), in_grads[i].begin()))
        << "variable " << i;
  }
}

}  // namespace
}  // namespace tessera
