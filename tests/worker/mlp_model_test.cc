#include "worker/mlp_model.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/cpu_backend.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ModelConfig SmallConfig(float dropout) {
  ModelConfig config;
  config.set_kind("mlp");
  config.set_input_dim(6);
  config.add_hidden_units(5);
  config.set_num_classes(3);
  config.set_dropout(dropout);
  return config;
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> RandomVector(int64_t n, std::mt19937* gen) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*gen);
  return v;
}

template <typename T>
std::vector<absl::Span<const float>> ConstSpans(const T& values) {
  return std::vector<absl::Span<const float>>(values.begin(), values.end());
}

template <typename T>
std::vector<absl::Span<float>> Spans(T& values) {
  return std::vector<absl::Span<float>>(values.begin(), values.end());
}

class MlpModelTest : public ::testing::Test {
 protected:
  std::unique_ptr<MlpModel> MakeModel(const ModelConfig& config) {
    absl::StatusOr<std::unique_ptr<MlpModel>> model =
        MlpModel::Create(config, &backend_);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }

  // Random values for every variable of `model`, biases included.
  std::vector<std::vector<float>> RandomParams(const MlpModel& model) {
    std::vector<std::vector<float>> params;
    for (const VariableDef& v : model.variables()) {
      params.push_back(RandomVector(NumElements(v.shape), &gen_));
    }
    return params;
  }

  CpuBackend backend_;
  std::mt19937 gen_{2024};
};

TEST_F(MlpModelTest, VariablesMatchModelSpec) {
  const ModelConfig config = SmallConfig(0.1f);
  std::unique_ptr<MlpModel> model = MakeModel(config);
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::vector<VariableDef>> want = ModelVariables(config, 17);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(model->variables().size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    EXPECT_EQ(model->variables()[i].name, (*want)[i].name);
    EXPECT_EQ(model->variables()[i].shape, (*want)[i].shape);
  }
  EXPECT_EQ(model->variables()[0].name, "dense_0/kernel");
  EXPECT_EQ(model->input_dim(), 6);
  EXPECT_EQ(model->num_classes(), 3);
}

TEST_F(MlpModelTest, CreateRejectsInvalidConfig) {
  ModelConfig config = SmallConfig(0);
  config.set_num_classes(1);
  EXPECT_EQ(MlpModel::Create(config, &backend_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Compares TrainStep's gradients with central differences of the batch's
// mean loss. Without dropout the loss comes from Evaluate; with dropout from
// TrainStep with the same seed, whose mask depends only on (seed, element).
void ExpectGradientsMatchFiniteDifferences(MlpModel* model, bool dropout,
                                           std::mt19937* gen) {
  const int64_t batch = 4;
  std::vector<std::vector<float>> params;
  int64_t total = 0;
  for (const VariableDef& v : model->variables()) {
    params.push_back(RandomVector(NumElements(v.shape), gen));
    total += NumElements(v.shape);
  }
  const std::vector<float> x = RandomVector(batch * model->input_dim(), gen);
  const std::vector<int32_t> labels = {0, 2, 1, 2};
  const uint64_t seed = 5;
  ASSERT_TRUE(model->SetParameters(ConstSpans(params)).ok());

  std::vector<std::vector<float>> grads;
  for (const auto& p : params) grads.emplace_back(p.size(), 0.0f);
  absl::StatusOr<BatchResult> step =
      model->TrainStep(x.data(), labels.data(), batch, seed, Spans(grads));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->examples, batch);

  std::vector<std::vector<float>> scratch = grads;
  auto mean_loss = [&]() {
    EXPECT_TRUE(model->SetParameters(ConstSpans(params)).ok());
    absl::StatusOr<BatchResult> r =
        dropout ? model->TrainStep(x.data(), labels.data(), batch, seed,
                                   Spans(scratch))
                : model->Evaluate(x.data(), labels.data(), batch);
    EXPECT_TRUE(r.ok()) << r.status();
    return r->loss_sum / batch;
  };
  EXPECT_NEAR(mean_loss(), step->loss_sum / batch, 1e-6);

  const float eps = 1e-3f;
  int64_t checked = 0;
  for (size_t v = 0; v < params.size(); ++v) {
    for (size_t i = 0; i < params[v].size(); ++i) {
      const float saved = params[v][i];
      params[v][i] = saved + eps;
      const double plus = mean_loss();
      params[v][i] = saved - eps;
      const double minus = mean_loss();
      params[v][i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(grads[v][i], numeric, 1e-3 + 2e-2 * std::abs(numeric))
          << model->variables()[v].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, total);
}

TEST_F(MlpModelTest, GradientsMatchFiniteDifferences) {
  std::unique_ptr<MlpModel> model = MakeModel(SmallConfig(0));
  ASSERT_NE(model, nullptr);
  ExpectGradientsMatchFiniteDifferences(model.get(), /*dropout=*/false, &gen_);
}

TEST_F(MlpModelTest, DropoutGradientsMatchFiniteDifferencesForFixedSeed) {
  ModelConfig config = SmallConfig(0.3f);
  config.add_hidden_units(4);  // 6 -> 5 -> 4 -> 3: dropout on two layers
  std::unique_ptr<MlpModel> model = MakeModel(config);
  ASSERT_NE(model, nullptr);
  ExpectGradientsMatchFiniteDifferences(model.get(), /*dropout=*/true, &gen_);
}

TEST_F(MlpModelTest, DropoutGradientsAreReproducibleForASeed) {
  std::unique_ptr<MlpModel> model = MakeModel(SmallConfig(0.5f));
  ASSERT_NE(model, nullptr);
  const int64_t batch = 8;
  const std::vector<std::vector<float>> params = RandomParams(*model);
  const std::vector<float> x = RandomVector(batch * 6, &gen_);
  const std::vector<int32_t> labels = {0, 1, 2, 0, 1, 2, 0, 1};
  ASSERT_TRUE(model->SetParameters(ConstSpans(params)).ok());
  auto grads_for = [&](uint64_t seed) {
    std::vector<std::vector<float>> grads;
    for (const auto& p : params) grads.emplace_back(p.size(), 0.0f);
    EXPECT_TRUE(
        model->TrainStep(x.data(), labels.data(), batch, seed, Spans(grads))
            .ok());
    return grads;
  };
  const auto a = grads_for(11);
  EXPECT_EQ(a, grads_for(11));
  EXPECT_NE(a, grads_for(12));
}

TEST_F(MlpModelTest, SetParametersRejectsWrongSize) {
  std::unique_ptr<MlpModel> model = MakeModel(SmallConfig(0));
  ASSERT_NE(model, nullptr);
  std::vector<std::vector<float>> params = RandomParams(*model);
  params[1].push_back(0.0f);  // dense_0/bias
  absl::Status s = model->SetParameters(ConstSpans(params));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("dense_0/bias"), HasSubstr("wrong shape")));

  params[1].pop_back();
  params.pop_back();
  EXPECT_EQ(model->SetParameters(ConstSpans(params)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(MlpModelTest, LabelOutsideRangeIsRejected) {
  std::unique_ptr<MlpModel> model = MakeModel(SmallConfig(0));
  ASSERT_NE(model, nullptr);
  const std::vector<std::vector<float>> params = RandomParams(*model);
  ASSERT_TRUE(model->SetParameters(ConstSpans(params)).ok());
  const std::vector<float> x(2 * 6, 0.5f);
  std::vector<std::vector<float>> grads;
  for (const auto& p : params) grads.emplace_back(p.size(), 0.0f);
  for (int32_t bad : {3, -1}) {
    const std::vector<int32_t> labels = {1, bad};
    absl::StatusOr<BatchResult> train =
        model->TrainStep(x.data(), labels.data(), 2, 1, Spans(grads));
    EXPECT_EQ(train.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(train.status().message(),
                HasSubstr(absl::StrCat("label ", bad)));
    absl::StatusOr<BatchResult> eval =
        model->Evaluate(x.data(), labels.data(), 2);
    EXPECT_EQ(eval.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(eval.status().message(),
                HasSubstr(absl::StrCat("label ", bad)));
  }
}

TEST_F(MlpModelTest, TrainStepRejectsWrongGradientBuffer) {
  std::unique_ptr<MlpModel> model = MakeModel(SmallConfig(0));
  ASSERT_NE(model, nullptr);
  std::vector<std::vector<float>> grads;
  for (const VariableDef& v : model->variables()) {
    grads.emplace_back(NumElements(v.shape), 0.0f);
  }
  grads[2].resize(1);  // dense_1/kernel
  const std::vector<float> x(6, 0.5f);
  const std::vector<int32_t> labels = {1};
  absl::StatusOr<BatchResult> r =
      model->TrainStep(x.data(), labels.data(), 1, 1, Spans(grads));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("dense_1/kernel"));
}

TEST_F(MlpModelTest, EvaluateCountsCorrectPredictionsWithoutDropout) {
  ModelConfig config;
  config.set_kind("mlp");
  config.set_input_dim(2);
  config.add_hidden_units(2);
  config.set_num_classes(2);
  config.set_dropout(0.5f);  // must not apply in Evaluate
  std::unique_ptr<MlpModel> model = MakeModel(config);
  ASSERT_NE(model, nullptr);
  const std::vector<float> identity = {1, 0, 0, 1}, zeros = {0, 0};
  const std::vector<absl::Span<const float>> params = {identity, zeros,
                                                       identity, zeros};
  ASSERT_TRUE(model->SetParameters(params).ok());
  // Logits are relu(x): {0,2} -> 1, {3,0} -> 0, {0,0} -> 0 (first max).
  const std::vector<float> x = {-1, 2, 3, -5, -1, -2};
  const std::vector<int32_t> labels = {1, 0, 1};
  for (int repeat = 0; repeat < 2; ++repeat) {
    absl::StatusOr<BatchResult> r = model->Evaluate(x.data(), labels.data(), 3);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->examples, 3);
    EXPECT_EQ(r->correct, 2);
    const double want = std::log(1 + std::exp(-2.0)) +
                        std::log(1 + std::exp(-3.0)) + std::log(2.0);
    EXPECT_NEAR(r->loss_sum, want, 1e-5);
  }
}

TEST_F(MlpModelTest, SmallerBatchAfterLargerGivesSameResult) {
  std::unique_ptr<MlpModel> model = MakeModel(SmallConfig(0));
  ASSERT_NE(model, nullptr);
  const std::vector<std::vector<float>> params = RandomParams(*model);
  ASSERT_TRUE(model->SetParameters(ConstSpans(params)).ok());
  const std::vector<float> x = RandomVector(8 * 6, &gen_);
  const std::vector<int32_t> labels = {0, 1, 2, 0, 1, 2, 0, 1};
  absl::StatusOr<BatchResult> small =
      model->Evaluate(x.data(), labels.data(), 2);
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE(model->Evaluate(x.data(), labels.data(), 8).ok());
  absl::StatusOr<BatchResult> again =
      model->Evaluate(x.data(), labels.data(), 2);
  ASSERT_TRUE(again.ok());
  EXPECT_DOUBLE_EQ(again->loss_sum, small->loss_sum);
  EXPECT_EQ(again->correct, small->correct);
}

TEST_F(MlpModelTest, EmptyBatchIsRefused) {
  std::unique_ptr<MlpModel> model = MakeModel(SmallConfig(0));
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->SetParameters(ConstSpans(RandomParams(*model))).ok());
  const float x = 0;
  const int32_t label = 0;
  absl::StatusOr<BatchResult> r = model->Evaluate(&x, &label, 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::vector<float>> grads = RandomParams(*model);
  std::vector<absl::Span<float>> spans;
  for (auto& g : grads) spans.emplace_back(absl::MakeSpan(g));
  r = model->TrainStep(&x, &label, 0, 1, spans);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// The checked overloads refuse features that are not input_dim() per label
// rather than read past their end.
TEST_F(MlpModelTest, FeaturesOfTheWrongSizeAreRejected) {
  std::unique_ptr<MlpModel> model = MakeModel(SmallConfig(0));
  ASSERT_NE(model, nullptr);
  const std::vector<std::vector<float>> params = RandomParams(*model);
  ASSERT_TRUE(model->SetParameters(ConstSpans(params)).ok());
  std::vector<std::vector<float>> grads;
  for (const auto& p : params) grads.emplace_back(p.size(), 0.0f);
  const std::vector<int32_t> labels = {1, 2};
  for (size_t features : {0, 6, 11, 13, 18}) {
    SCOPED_TRACE(features);
    const std::vector<float> x(features, 0.5f);
    absl::StatusOr<BatchResult> train =
        model->TrainStep(x, labels, 1, Spans(grads));
    EXPECT_EQ(train.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(train.status().message(),
                AllOf(HasSubstr(absl::StrCat(features, " features for 2")),
                      HasSubstr("expects 6")));
    absl::StatusOr<BatchResult> eval = model->Evaluate(x, labels);
    EXPECT_EQ(eval.status().code(), absl::StatusCode::kInvalidArgument);
  }
  const std::vector<float> x(12, 0.5f);
  EXPECT_TRUE(model->TrainStep(x, labels, 1, Spans(grads)).ok());
  EXPECT_TRUE(model->Evaluate(x, labels).ok());
  EXPECT_EQ(model->Evaluate(x, absl::Span<const int32_t>()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
