#include "worker/ctr_model.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
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
#include "worker/criteo_reader.h"
#include "worker/ctr_generator.h"
#include "worker/ctr_local_trainer.h"
#include "worker/ctr_metrics.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

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

ModelConfig SmallConfig(const std::string& combiner, float dropout) {
  ModelConfig config;
  config.set_kind("ctr");
  config.set_embedding_dim(3);
  config.set_num_fields(3);
  config.set_num_dense(2);
  config.add_hidden_units(5);
  config.set_combiner(combiner);
  config.set_dropout(dropout);
  return config;
}

// A batch of 4 for SmallConfig: field 0 multi-hot with a repeated row and
// an empty bag, field 1 single-hot, field 2 all empty; row 4 of field 0's
// table and row 2 of field 1's are gathered but unused.
struct Batch {
  std::vector<float> labels = {1, 0, 0, 1};
  std::vector<float> dense;
  std::vector<std::vector<int64_t>> offsets = {
      {0, 3, 3, 5, 6}, {0, 1, 2, 3, 4}, {0, 0, 0, 0, 0}};
  std::vector<std::vector<int64_t>> rows = {
      {0, 2, 0, 1, 3, 2}, {1, 0, 1, 3}, {}};
  std::vector<std::vector<float>> tables;  // [5, 3], [4, 3], [2, 3]
  std::vector<CtrFieldInput> fields;

  explicit Batch(std::mt19937* gen) {
    dense = RandomVector(8, gen);
    tables = {RandomVector(15, gen), RandomVector(12, gen),
              RandomVector(6, gen)};
    Bind();
  }
  void Bind() {
    fields.resize(3);
    for (int f = 0; f < 3; ++f) {
      fields[f] = {offsets[f], rows[f], tables[f]};
    }
  }
  CtrModelInput Input() const {
    return CtrModelInput{4, labels, dense, fields};
  }
};

class CtrModelTest : public ::testing::Test {
 protected:
  std::unique_ptr<CtrModel> MakeModel(const ModelConfig& config) {
    absl::StatusOr<std::unique_ptr<CtrModel>> model =
        CtrModel::Create(config, &backend_);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }

  std::vector<std::vector<float>> RandomDense(const CtrModel& model) {
    std::vector<std::vector<float>> params;
    for (const VariableDef& v : model.dense_variables()) {
      params.push_back(RandomVector(NumElements(v.shape), &gen_));
    }
    return params;
  }

  CpuBackend backend_;
  std::mt19937 gen_{2025};
};

template <typename T>
std::vector<absl::Span<const float>> ConstSpans(const T& values) {
  return std::vector<absl::Span<const float>>(values.begin(), values.end());
}

template <typename T>
std::vector<absl::Span<float>> Spans(T& values) {
  return std::vector<absl::Span<float>>(values.begin(), values.end());
}

TEST_F(CtrModelTest, VariablesMatchModelSpec) {
  const ModelConfig config = SmallConfig("mean", 0);
  std::unique_ptr<CtrModel> model = MakeModel(config);
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::vector<VariableDef>> want = ModelVariables(config, 3);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(model->variables().size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    EXPECT_EQ(model->variables()[i].name, (*want)[i].name);
    EXPECT_EQ(model->variables()[i].sparse, (*want)[i].sparse);
  }
  ASSERT_EQ(model->dense_variables().size(), 4u);
  EXPECT_EQ(model->dense_variables()[0].name, "dense_0/kernel");
  EXPECT_EQ(model->dense_variables()[0].shape,
            (std::vector<int64_t>{3 * 3 + 2, 5}));
  EXPECT_EQ(model->combiner(), Backend::Combiner::kMean);
  EXPECT_EQ(MakeModel(SmallConfig("", 0))->combiner(), Backend::Combiner::kSum);

  ModelConfig mlp;
  mlp.set_kind("mlp");
  mlp.set_input_dim(4);
  mlp.set_num_classes(2);
  EXPECT_THAT(CtrModel::Create(mlp, &backend_).status().message(),
              HasSubstr("ctr"));
  EXPECT_FALSE(CtrModel::Create(SmallConfig("max", 0), &backend_).ok());
}

// Central differences of the batch's mean loss against TrainStep's
// gradients, for every dense parameter and every element of every gathered
// table (a row the batch does not use must get no gradient).
void ExpectGradientsMatchFiniteDifferences(CtrModel* model, bool dropout,
                                           std::mt19937* gen) {
  Batch batch(gen);
  std::vector<std::vector<float>> dense;
  for (const VariableDef& v : model->dense_variables()) {
    dense.push_back(RandomVector(NumElements(v.shape), gen));
  }
  const uint64_t seed = 9;
  ASSERT_TRUE(model->SetDenseParameters(ConstSpans(dense)).ok());
  std::vector<std::vector<float>> grads;
  for (const auto& p : dense) grads.emplace_back(p.size(), 0.0f);
  std::vector<CtrSparseGrad> sparse;
  std::vector<float> probabilities;
  absl::StatusOr<CtrBatchResult> step = model->TrainStep(
      batch.Input(), seed, Spans(grads), &sparse, &probabilities);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->examples, 4);
  ASSERT_EQ(probabilities.size(), 4u);
  double loss_from_p = 0;
  for (int b = 0; b < 4; ++b) {
    loss_from_p -= batch.labels[b] ? std::log(probabilities[b])
                                   : std::log(1 - probabilities[b]);
  }
  EXPECT_NEAR(loss_from_p, step->loss_sum, 1e-4);
  ASSERT_EQ(sparse.size(), 3u);
  EXPECT_EQ(sparse[0].rows, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(sparse[1].rows, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_TRUE(sparse[2].rows.empty());
  EXPECT_TRUE(sparse[2].values.empty());

  std::vector<std::vector<float>> scratch = grads;
  std::vector<CtrSparseGrad> scratch_sparse;
  auto mean_loss = [&]() {
    batch.Bind();
    EXPECT_TRUE(model->SetDenseParameters(ConstSpans(dense)).ok());
    absl::StatusOr<CtrBatchResult> r =
        dropout ? model->TrainStep(batch.Input(), seed, Spans(scratch),
                                   &scratch_sparse)
                : model->Evaluate(batch.Input());
    EXPECT_TRUE(r.ok()) << r.status();
    return r->loss_sum / 4;
  };
  EXPECT_NEAR(mean_loss(), step->loss_sum / 4, 1e-6);

  const float eps = 1e-3f;
  auto numeric = [&](float* x) {
    const float saved = *x;
    *x = saved + eps;
    const double plus = mean_loss();
    *x = saved - eps;
    const double minus = mean_loss();
    *x = saved;
    return (plus - minus) / (2 * eps);
  };
  auto tolerance = [](double g) { return 1e-3 + 2e-2 * std::abs(g); };
  for (size_t v = 0; v < dense.size(); ++v) {
    for (size_t i = 0; i < dense[v].size(); ++i) {
      const double g = numeric(&dense[v][i]);
      EXPECT_NEAR(grads[v][i], g, tolerance(g))
          << model->dense_variables()[v].name << "[" << i << "]";
    }
  }
  int64_t nonzero = 0;
  for (int f = 0; f < 3; ++f) {
    for (size_t i = 0; i < batch.tables[f].size(); ++i) {
      const int64_t row = static_cast<int64_t>(i) / 3;
      const double g = numeric(&batch.tables[f][i]);
      double got = 0;
      for (size_t k = 0; k < sparse[f].rows.size(); ++k) {
        if (sparse[f].rows[k] == row) got = sparse[f].values[k * 3 + i % 3];
      }
      EXPECT_NEAR(got, g, tolerance(g))
          << "embedding_" << f << " row " << row << " column " << i % 3;
      nonzero += std::abs(g) > 1e-4;
    }
  }
  // Rows 0-3 of field 0 and 0, 1, 3 of field 1 carry gradients.
  EXPECT_GT(nonzero, 15);
}

class CtrModelGradientTest : public CtrModelTest,
                             public ::testing::WithParamInterface<const char*> {
};

TEST_P(CtrModelGradientTest, GradientsMatchFiniteDifferences) {
  std::unique_ptr<CtrModel> model = MakeModel(SmallConfig(GetParam(), 0));
  ASSERT_NE(model, nullptr);
  ExpectGradientsMatchFiniteDifferences(model.get(), /*dropout=*/false, &gen_);
}

TEST_P(CtrModelGradientTest, DropoutGradientsMatchForAFixedSeed) {
  ModelConfig config = SmallConfig(GetParam(), 0.3f);
  config.add_hidden_units(4);
  std::unique_ptr<CtrModel> model = MakeModel(config);
  ASSERT_NE(model, nullptr);
  ExpectGradientsMatchFiniteDifferences(model.get(), /*dropout=*/true, &gen_);
}

INSTANTIATE_TEST_SUITE_P(Combiners, CtrModelGradientTest,
                         ::testing::Values("sum", "mean"));

TEST_F(CtrModelTest, WithoutHiddenLayersOrDenseFeatures) {
  ModelConfig config = SmallConfig("sum", 0);
  config.clear_hidden_units();
  std::unique_ptr<CtrModel> model = MakeModel(config);
  ASSERT_NE(model, nullptr);
  ExpectGradientsMatchFiniteDifferences(model.get(), false, &gen_);

  config.set_num_dense(0);
  model = MakeModel(config);
  ASSERT_NE(model, nullptr);
  Batch batch(&gen_);
  batch.dense.clear();
  batch.Bind();
  ASSERT_TRUE(model->SetDenseParameters(ConstSpans(RandomDense(*model))).ok());
  EXPECT_TRUE(model->Evaluate(batch.Input()).ok());
}

TEST_F(CtrModelTest, RejectsBadInput) {
  std::unique_ptr<CtrModel> model = MakeModel(SmallConfig("sum", 0));
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->SetDenseParameters(ConstSpans(RandomDense(*model))).ok());
  auto error = [&](Batch& b) {
    b.Bind();
    absl::StatusOr<CtrBatchResult> r = model->Evaluate(b.Input());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  Batch b(&gen_);
  b.rows[1][2] = 4;  // the table has 4 rows
  EXPECT_THAT(error(b), HasSubstr("field 1: id 2 is row 4 of a table of 4"));
  b = Batch(&gen_);
  b.rows[0][0] = -1;
  EXPECT_THAT(error(b), HasSubstr("field 0"));
  b = Batch(&gen_);
  b.offsets[0] = {0, 3, 2, 5, 6};
  EXPECT_THAT(error(b), HasSubstr("field 0: offsets decrease"));
  b = Batch(&gen_);
  b.offsets[2] = {0, 0, 0, 0};
  EXPECT_THAT(error(b), HasSubstr("field 2: offsets must have 5"));
  b = Batch(&gen_);
  b.offsets[0].back() = 5;
  EXPECT_THAT(error(b), HasSubstr("field 0: offsets"));
  b = Batch(&gen_);
  b.tables[2].push_back(0.5f);
  EXPECT_THAT(error(b), HasSubstr("not a multiple of the embedding"));
  b = Batch(&gen_);
  b.labels[3] = 2;
  EXPECT_THAT(error(b), HasSubstr("label 2 of batch row 3"));
  b = Batch(&gen_);
  b.dense.pop_back();
  EXPECT_THAT(error(b), HasSubstr("dense features"));
  b = Batch(&gen_);
  b.Bind();
  b.fields.pop_back();
  EXPECT_THAT(model->Evaluate(b.Input()).status().message(),
              HasSubstr("3 fields, got 2"));
  b = Batch(&gen_);
  b.Bind();
  CtrModelInput empty = b.Input();
  empty.batch = 0;
  EXPECT_FALSE(model->Evaluate(empty).ok());

  b = Batch(&gen_);
  b.Bind();
  std::vector<std::vector<float>> grads;
  for (const VariableDef& v : model->dense_variables()) {
    grads.emplace_back(NumElements(v.shape), 0.0f);
  }
  grads[1].pop_back();
  std::vector<CtrSparseGrad> sparse;
  EXPECT_THAT(
      model->TrainStep(b.Input(), 1, Spans(grads), &sparse).status().message(),
      HasSubstr("dense_0/bias"));
  std::vector<std::vector<float>> values = RandomDense(*model);
  values[2].push_back(0);
  EXPECT_THAT(model->SetDenseParameters(ConstSpans(values)).message(),
              HasSubstr("dense_1/kernel"));
}

// Trains on a small generated data set in one process and checks that the
// model learns: its test AUC gets well above chance and near the best
// achievable.
TEST(CtrModelLearningTest, ReachesMostOfTheBestAucOnGeneratedData) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/ctr_learning_test_", getpid());
  std::filesystem::create_directories(dir);
  CtrGeneratorOptions o;
  o.train_examples = 50000;
  o.test_examples = 10000;
  o.num_fields = 4;
  o.num_dense = 3;
  o.vocab_size = 1000;
  o.multi_hot_fields = 1;
  o.seed = 3;
  absl::StatusOr<CtrGeneratorSummary> summary = GenerateCtrFiles(o, dir);
  ASSERT_TRUE(summary.ok()) << summary.status();
  const CriteoFormat format{o.num_dense, o.num_fields};
  absl::StatusOr<CtrDataset> train =
      LoadCriteo(summary->train_path, 0, -1, format);
  absl::StatusOr<CtrDataset> test =
      LoadCriteo(summary->test_path, 0, -1, format);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_TRUE(test.ok()) << test.status();

  ModelConfig config;
  config.set_kind("ctr");
  config.set_embedding_dim(8);
  config.set_num_fields(o.num_fields);
  config.set_num_dense(o.num_dense);
  config.add_hidden_units(16);
  CpuBackend backend;
  LocalCtrTrainerOptions options;
  absl::StatusOr<std::unique_ptr<LocalCtrTrainer>> trainer =
      LocalCtrTrainer::Create(config, options, &backend);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  double first_loss = 0, last_loss = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    absl::StatusOr<double> loss = (*trainer)->TrainEpoch(*train, epoch);
    ASSERT_TRUE(loss.ok()) << loss.status();
    (epoch == 0 ? first_loss : last_loss) = *loss;
  }
  EXPECT_LT(last_loss, first_loss);
  absl::StatusOr<std::vector<float>> p = (*trainer)->Predict(*test);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<double> auc = RocAuc(*p, test->labels);
  ASSERT_TRUE(auc.ok()) << auc.status();
  RecordProperty("auc", absl::StrCat(*auc));
  RecordProperty("best_auc", absl::StrCat(summary->best_auc));
  EXPECT_GT(*auc, 0.5 + 0.8 * (summary->best_auc - 0.5))
      << "best " << summary->best_auc;
  EXPECT_LE(*auc, summary->best_auc + 0.01);
  for (int f = 0; f < o.num_fields; ++f) {
    EXPECT_GT((*trainer)->table_rows(f), 500) << "field " << f;
    EXPECT_LE((*trainer)->table_rows(f), 1000) << "field " << f;
  }
}

}  // namespace
}  // namespace tessera
