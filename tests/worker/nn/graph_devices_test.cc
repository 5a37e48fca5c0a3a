// The CPU-versus-CUDA comparison of every layer: each test model of
// layer_test_models.h trains one step and evaluates on both backends from
// the same parameters, batch and seed; losses and every gradient (dense
// and table rows) must agree to float rounding. Skipped without a GPU.

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "tests/worker/nn/graph_test_util.h"
#include "tests/worker/nn/layer_test_models.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/cuda_backend.h"

namespace tessera {
namespace {

// max |got - want| <= tol * max |want|, so entries near zero are not held
// to a relative bound.
::testing::AssertionResult NormwiseClose(const std::vector<float>& got,
                                         const std::vector<float>& want,
                                         double tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << got.size() << " vs " << want.size();
  }
  double scale = 1e-20, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  if (worst <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max |cuda - cpu| = " << worst << " > " << tol << " * " << scale;
}

struct StepOutput {
  double loss = 0, eval_loss = 0;
  std::vector<std::vector<float>> grads;
  std::vector<TableGradient> tables;
};

StepOutput RunStep(const ModelGraph& described, Backend* backend) {
  StepOutput out;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(described, backend);
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return out;
  std::vector<std::vector<float>> values =
      InitialValues((*graph)->dense_variables());
  for (const auto& v : values) out.grads.emplace_back(v.size());
  RandomGraphBatch batch;
  MakeRandomBatch(described, **graph, 64, 40, &batch);
  EXPECT_TRUE((*graph)->SetParameters(ConstViews(values)).ok());
  absl::StatusOr<GraphResult> trained =
      (*graph)->TrainStep(batch.view, 7, Views(out.grads), &out.tables);
  EXPECT_TRUE(trained.ok()) << trained.status();
  absl::StatusOr<GraphResult> evaluated = (*graph)->Evaluate(batch.view);
  EXPECT_TRUE(evaluated.ok()) << evaluated.status();
  if (trained.ok()) out.loss = trained->loss_sum;
  if (evaluated.ok()) out.eval_loss = evaluated->loss_sum;
  return out;
}

class GraphDevicesTest : public ::testing::TestWithParam<LayerTestModel> {};

TEST_P(GraphDevicesTest, CudaMatchesCpu) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
  if (!gpu.ok()) {
    TESSERA_NO_GPU() << "no GPU to compare the layers on: "
                     << gpu.status().message();
  }
  absl::StatusOr<ModelGraph> described =
      BuildModelGraph(Parse(GetParam().text), 3);
  ASSERT_TRUE(described.ok()) << described.status();
  CpuBackend cpu;
  const StepOutput want = RunStep(*described, &cpu);
  const StepOutput got = RunStep(*described, gpu->get());
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::fabs(want.loss) + 1e-6);
  EXPECT_NEAR(got.eval_loss, want.eval_loss,
              1e-5 * std::fabs(want.eval_loss) + 1e-6);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    EXPECT_TRUE(NormwiseClose(got.grads[i], want.grads[i], 1e-4))
        << "variable " << i;
  }
  ASSERT_EQ(got.tables.size(), want.tables.size());
  for (size_t t = 0; t < want.tables.size(); ++t) {
    EXPECT_EQ(got.tables[t].rows, want.tables[t].rows) << "table " << t;
    EXPECT_TRUE(
        NormwiseClose(got.tables[t].values, want.tables[t].values, 1e-4))
        << "table " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryLayer, GraphDevicesTest, ::testing::ValuesIn(kLayerTestModels),
    [](const ::testing::TestParamInfo<LayerTestModel>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace tessera
