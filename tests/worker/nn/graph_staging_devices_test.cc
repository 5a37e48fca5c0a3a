// Parameters staged on the device by another thread (Graph::StageParameters,
// the prefetching worker's path): they take effect only when used, steps in
// between still see the old ones, a discarded set changes nothing, and bad
// sizes are refused. On the CPU, and on the CUDA backend where a GPU
// answers (its uploads run on a stream of their own).

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "tests/worker/nn/graph_test_util.h"
#include "tests/worker/nn/layer_test_models.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/host_memory.h"

namespace tessera {
namespace {

// `values` scaled by `factor`, in host memory of `backend` (pinned on a
// GPU), as the worker's parameter buffers are.
std::vector<HostArray<float>> HostCopy(
    const std::vector<std::vector<float>>& values, float factor,
    Backend* backend) {
  std::vector<HostArray<float>> out;
  for (const std::vector<float>& v : values) {
    out.emplace_back(backend, static_cast<int64_t>(v.size()));
    for (size_t i = 0; i < v.size(); ++i) out.back().data()[i] = v[i] * factor;
  }
  return out;
}

std::vector<absl::Span<const float>> Spans(
    const std::vector<HostArray<float>>& arrays) {
  std::vector<absl::Span<const float>> spans;
  for (const HostArray<float>& a : arrays) {
    spans.emplace_back(a.data(), a.size());
  }
  return spans;
}

class GraphStagingTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cpu") {
      backend_ = std::make_unique<CpuBackend>();
    } else {
      absl::StatusOr<std::unique_ptr<Backend>> gpu = NewCudaBackend(0);
      if (!gpu.ok()) {
        TESSERA_NO_GPU() << "no GPU for the CUDA backend's uploads: "
                         << gpu.status().message();
      }
      backend_ = *std::move(gpu);
    }
    absl::StatusOr<ModelGraph> described = BuildModelGraph(Parse(kMlp), 3);
    ASSERT_TRUE(described.ok()) << described.status();
    described_ = *described;
    absl::StatusOr<std::unique_ptr<Graph>> graph =
        Graph::Create(described_, backend_.get());
    ASSERT_TRUE(graph.ok()) << graph.status();
    graph_ = *std::move(graph);
    values_ = InitialValues(graph_->dense_variables());
    MakeRandomBatch(described_, *graph_, 32, 40, &batch_);
  }

  // The evaluation loss of the batch with the graph's parameters now.
  double Loss() {
    absl::StatusOr<GraphResult> r = graph_->Evaluate(batch_.view);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->loss_sum : -1;
  }

  // The same with `values` set directly.
  double LossWith(const std::vector<HostArray<float>>& values) {
    EXPECT_TRUE(graph_->SetParameters(Spans(values)).ok());
    return Loss();
  }

  // Stages `values` from a thread of its own, as the prefetcher does.
  absl::Status StageFromAnotherThread(
      const std::vector<HostArray<float>>& values) {
    absl::Status status;
    std::thread prefetcher(
        [&] { status = graph_->StageParameters(Spans(values)); });
    prefetcher.join();
    return status;
  }

  std::unique_ptr<Backend> backend_;
  ModelGraph described_;
  std::unique_ptr<Graph> graph_;
  std::vector<std::vector<float>> values_;
  RandomGraphBatch batch_;
};

TEST_P(GraphStagingTest, StagedParametersTakeEffectOnlyWhenUsed) {
  const std::vector<HostArray<float>> a =
      HostCopy(values_, 1.0f, backend_.get());
  const std::vector<HostArray<float>> b =
      HostCopy(values_, 0.5f, backend_.get());
  const std::vector<HostArray<float>> c =
      HostCopy(values_, 2.0f, backend_.get());
  const double loss_b = LossWith(b);
  const double loss_c = LossWith(c);
  const double loss_a = LossWith(a);
  ASSERT_NE(loss_a, loss_b);
  ASSERT_NE(loss_a, loss_c);

  ASSERT_TRUE(graph_->PrepareStaging().ok());
  ASSERT_TRUE(StageFromAnotherThread(b).ok());
  // A step between the upload and its use still computes with a.
  std::vector<std::vector<float>> grads;
  for (const auto& v : values_) grads.emplace_back(v.size());
  absl::StatusOr<GraphResult> trained =
      graph_->TrainStep(batch_.view, 7, Views(grads));
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_EQ(Loss(), loss_a);
  graph_->UseStagedParameters();
  EXPECT_EQ(Loss(), loss_b);

  // A discarded set is never used; the next one is.
  ASSERT_TRUE(StageFromAnotherThread(c).ok());
  graph_->DiscardStagedParameters();
  EXPECT_EQ(Loss(), loss_b);
  ASSERT_TRUE(StageFromAnotherThread(c).ok());
  graph_->UseStagedParameters();
  EXPECT_EQ(Loss(), loss_c);
  EXPECT_TRUE(backend_->Synchronize().ok());
}

TEST_P(GraphStagingTest, RefusesWrongSizesAndStagingBeforePrepare) {
  const std::vector<HostArray<float>> a =
      HostCopy(values_, 1.0f, backend_.get());
  absl::Status early = graph_->StageParameters(Spans(a));
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;

  ASSERT_TRUE(graph_->PrepareStaging().ok());
  std::vector<absl::Span<const float>> short_one = Spans(a);
  short_one[0] = short_one[0].subspan(1);
  absl::Status wrong = graph_->StageParameters(short_one);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument) << wrong;
  EXPECT_NE(wrong.message().find(graph_->dense_variables()[0].name),
            std::string::npos)
      << wrong;
  short_one.pop_back();
  EXPECT_EQ(graph_->StageParameters(short_one).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, GraphStagingTest,
                         ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace tessera
