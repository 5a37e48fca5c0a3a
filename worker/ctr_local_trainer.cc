#include "worker/ctr_local_trainer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/counter_rng.h"
#include "common/initializer.h"

namespace tessera {
namespace {

// Keras' Adam defaults.
constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kAdamEpsilon = 1e-7f;
constexpr float kAdagradEpsilon = 1e-7f;

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The first element of an id's row in a table of unbounded size (wraps).
int64_t RowElement(int64_t id, int64_t dim) {
  return static_cast<int64_t>(static_cast<uint64_t>(id) *
                              static_cast<uint64_t>(dim));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCtrTrainer>> LocalCtrTrainer::Create(
    const ModelConfig& config, const LocalCtrTrainerOptions& options,
    Backend* backend) {
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size must be >= 1, got ", options.batch_size));
  }
  absl::StatusOr<std::unique_ptr<CtrModel>> model =
      CtrModel::Create(config, backend);
  if (!model.ok()) return model.status();
  std::unique_ptr<LocalCtrTrainer> trainer(
      new LocalCtrTrainer(*std::move(model), options));
  // Initial values as the parameter servers make them.
  absl::StatusOr<std::vector<VariableDef>> vars =
      ModelVariables(config, options.seed);
  if (!vars.ok()) return vars.status();
  std::vector<absl::Span<const float>> spans;
  for (size_t i = 0; i < vars->size(); ++i) {
    const VariableDef& v = (*vars)[i];
    if (v.sparse) {
      trainer->tables_[i].initializer = v.initializer;
      continue;
    }
    std::vector<float> values(NumElements(v.shape));
    FillInitialValues(v.initializer, 0, absl::MakeSpan(values));
    trainer->dense_grads_.emplace_back(values.size(), 0.0f);
    trainer->adam_m_.emplace_back(values.size(), 0.0f);
    trainer->adam_v_.emplace_back(values.size(), 0.0f);
    trainer->dense_.push_back(std::move(values));
  }
  for (const auto& d : trainer->dense_) spans.emplace_back(d);
  if (absl::Status s = trainer->model_->SetDenseParameters(spans); !s.ok()) {
    return s;
  }
  return trainer;
}

LocalCtrTrainer::LocalCtrTrainer(std::unique_ptr<CtrModel> model,
                                 const LocalCtrTrainerOptions& options)
    : model_(std::move(model)),
      options_(options),
      tables_(model_->num_fields()),
      unique_(model_->num_fields()),
      rows_(model_->num_fields()),
      gathered_(model_->num_fields()),
      inputs_(model_->num_fields()) {}

absl::Status LocalCtrTrainer::CheckData(const CtrDataset& data) const {
  if (data.num_fields != model_->num_fields() ||
      data.num_dense != model_->num_dense()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data set has ", data.num_fields, " fields and ",
                     data.num_dense, " dense features, the model ",
                     model_->num_fields(), " and ", model_->num_dense()));
  }
  return absl::OkStatus();
}

void LocalCtrTrainer::Prepare(const CtrDataset& data,
                              absl::Span<const int64_t> examples, bool create) {
  // GatherCtrBatch cannot fail: the callers pass indices of `data`.
  GatherCtrBatch(data, examples, &batch_).IgnoreError();
  const int64_t dim = model_->embedding_dim();
  for (int f = 0; f < model_->num_fields(); ++f) {
    Table& table = tables_[f];
    LocalizeIds(batch_.fields[f].ids, &unique_[f], &rows_[f]);
    std::vector<float>& gathered = gathered_[f];
    gathered.resize(unique_[f].size() * dim);
    for (size_t u = 0; u < unique_[f].size(); ++u) {
      const int64_t id = unique_[f][u];
      float* out = gathered.data() + u * dim;
      auto it = table.index.find(id);
      if (it == table.index.end() && create) {
        const int64_t row = static_cast<int64_t>(table.index.size());
        it = table.index.emplace(id, row).first;
        table.values.resize((row + 1) * dim);
        table.accumulators.resize((row + 1) * dim,
                                  options_.initial_accumulator);
        FillInitialValues(table.initializer, RowElement(id, dim),
                          absl::MakeSpan(table.values.data() + row * dim, dim));
      }
      if (it == table.index.end()) {
        FillInitialValues(table.initializer, RowElement(id, dim),
                          absl::MakeSpan(out, dim));
      } else {
        std::copy_n(table.values.data() + it->second * dim, dim, out);
      }
    }
    inputs_[f].offsets = batch_.fields[f].offsets;
    inputs_[f].rows = rows_[f];
    inputs_[f].table = gathered;
  }
}

void LocalCtrTrainer::ApplyDense() {
  ++adam_steps_;
  const float lr = options_.dense_learning_rate;
  const double c1 = 1 - std::pow(kBeta1, adam_steps_);
  const double c2 = 1 - std::pow(kBeta2, adam_steps_);
  const float step = static_cast<float>(lr * std::sqrt(c2) / c1);
  for (size_t v = 0; v < dense_.size(); ++v) {
    for (size_t i = 0; i < dense_[v].size(); ++i) {
      const float g = dense_grads_[v][i];
      float& m = adam_m_[v][i];
      float& s = adam_v_[v][i];
      m = kBeta1 * m + (1 - kBeta1) * g;
      s = kBeta2 * s + (1 - kBeta2) * g * g;
      dense_[v][i] -= step * m / (std::sqrt(s) + kAdamEpsilon);
    }
  }
}

void LocalCtrTrainer::ApplySparse() {
  const int64_t dim = model_->embedding_dim();
  const float lr = options_.embedding_learning_rate;
  for (int f = 0; f < model_->num_fields(); ++f) {
    Table& table = tables_[f];
    const CtrSparseGrad& grad = sparse_grads_[f];
    for (size_t k = 0; k < grad.rows.size(); ++k) {
      const int64_t row = table.index.at(unique_[f][grad.rows[k]]);
      float* w = table.values.data() + row * dim;
      float* acc = table.accumulators.data() + row * dim;
      const float* g = grad.values.data() + k * dim;
      for (int64_t d = 0; d < dim; ++d) {
        acc[d] += g[d] * g[d];
        w[d] -= lr * g[d] / (std::sqrt(acc[d]) + kAdagradEpsilon);
      }
    }
  }
}

absl::StatusOr<double> LocalCtrTrainer::TrainEpoch(const CtrDataset& data,
                                                   int epoch) {
  if (absl::Status s = CheckData(data); !s.ok()) return s;
  std::vector<int64_t> order(data.size);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 gen(DeriveSeed(options_.seed, epoch));
  std::shuffle(order.begin(), order.end(), gen);
  double loss_sum = 0;
  std::vector<absl::Span<float>> grad_spans;
  for (auto& g : dense_grads_) grad_spans.emplace_back(g);
  std::vector<absl::Span<const float>> param_spans;
  for (const auto& p : dense_) param_spans.emplace_back(p);
  for (int64_t start = 0; start < data.size; start += options_.batch_size) {
    const int64_t n = std::min(options_.batch_size, data.size - start);
    Prepare(data, absl::MakeConstSpan(order).subspan(start, n),
            /*create=*/true);
    CtrModelInput input;
    input.batch = n;
    input.labels = batch_.labels;
    input.dense = batch_.dense;
    input.fields = inputs_;
    absl::StatusOr<CtrBatchResult> r = model_->TrainStep(
        input, DeriveSeed(DeriveSeed(options_.seed, epoch), start), grad_spans,
        &sparse_grads_);
    if (!r.ok()) return r.status();
    loss_sum += r->loss_sum;
    ApplyDense();
    ApplySparse();
    if (absl::Status s = model_->SetDenseParameters(param_spans); !s.ok()) {
      return s;
    }
  }
  return data.size > 0 ? loss_sum / data.size : 0.0;
}

absl::StatusOr<std::vector<float>> LocalCtrTrainer::Predict(
    const CtrDataset& data) {
  if (absl::Status s = CheckData(data); !s.ok()) return s;
  std::vector<float> out, probabilities;
  out.reserve(data.size);
  std::vector<int64_t> examples;
  for (int64_t start = 0; start < data.size; start += options_.batch_size) {
    const int64_t n = std::min(options_.batch_size, data.size - start);
    examples.resize(n);
    std::iota(examples.begin(), examples.end(), start);
    Prepare(data, examples, /*create=*/false);
    CtrModelInput input;
    input.batch = n;
    input.labels = batch_.labels;
    input.dense = batch_.dense;
    input.fields = inputs_;
    absl::StatusOr<CtrBatchResult> r = model_->Evaluate(input, &probabilities);
    if (!r.ok()) return r.status();
    out.insert(out.end(), probabilities.begin(), probabilities.end());
  }
  return out;
}

}  // namespace tessera
