#include "worker/ctr_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/counter_rng.h"
#include "worker/parameter_upload.h"

namespace tessera {
namespace {

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Device arrays are never empty, so a batch without ids still has valid
// pointers.
int64_t AtLeastOne(int64_t n) { return std::max<int64_t>(n, 1); }

}  // namespace

absl::StatusOr<std::unique_ptr<CtrModel>> CtrModel::Create(
    const ModelConfig& config, Backend* backend) {
  if (config.kind() != "ctr") {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.kind: CtrModel needs \"ctr\", got \"", config.kind(), "\""));
  }
  absl::StatusOr<std::vector<VariableDef>> vars = ModelVariables(config, 0);
  if (!vars.ok()) return vars.status();
  std::vector<int64_t> widths = {int64_t{config.num_fields()} *
                                     config.embedding_dim() +
                                 config.num_dense()};
  for (int units : config.hidden_units()) widths.push_back(units);
  widths.push_back(1);
  return std::unique_ptr<CtrModel>(
      new CtrModel(*std::move(vars), config, std::move(widths), backend));
}

CtrModel::CtrModel(std::vector<VariableDef> variables,
                   const ModelConfig& config, std::vector<int64_t> widths,
                   Backend* backend)
    : variables_(std::move(variables)),
      num_fields_(config.num_fields()),
      dim_(config.embedding_dim()),
      num_dense_(config.num_dense()),
      combiner_(config.combiner() == "mean" ? Backend::Combiner::kMean
                                            : Backend::Combiner::kSum),
      dropout_(config.dropout()),
      widths_(std::move(widths)),
      backend_(backend),
      fields_(num_fields_) {
  for (const VariableDef& v : dense_variables()) {
    params_.emplace_back(backend_, NumElements(v.shape));
    grads_.emplace_back(backend_, NumElements(v.shape));
  }
}

absl::Status CtrModel::SetDenseParameters(
    absl::Span<const absl::Span<const float>> values) {
  return UploadParameters(backend_, dense_variables(), "dense ", values,
                          params_);
}

absl::Status CtrModel::CheckInput(const CtrModelInput& in) const {
  const int64_t batch = in.batch;
  if (batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch needs at least one example, got ", batch));
  }
  if (static_cast<int64_t>(in.labels.size()) != batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch of ", batch, " examples has ", in.labels.size(), " labels"));
  }
  for (int64_t b = 0; b < batch; ++b) {
    if (!(in.labels[b] >= 0.0f && in.labels[b] <= 1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label ", in.labels[b], " of batch row ", b, " is outside [0, 1]"));
    }
  }
  if (static_cast<int64_t>(in.dense.size()) != batch * num_dense_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wrong shape: dense features of ", batch, " examples x ", num_dense_,
        " need ", batch * num_dense_, " values, got ", in.dense.size()));
  }
  if (static_cast<int>(in.fields.size()) != num_fields_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model has ", num_fields_, " fields, got ", in.fields.size()));
  }
  for (int f = 0; f < num_fields_; ++f) {
    const CtrFieldInput& field = in.fields[f];
    if (static_cast<int64_t>(field.offsets.size()) != batch + 1 ||
        field.offsets[0] != 0 ||
        field.offsets[batch] != static_cast<int64_t>(field.rows.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field ", f, ": offsets must have ", batch + 1,
          " entries from 0 to the number of ids (", field.rows.size(), ")"));
    }
    for (int64_t b = 0; b < batch; ++b) {
      if (field.offsets[b + 1] < field.offsets[b]) {
        return absl::InvalidArgumentError(
            absl::StrCat("field ", f, ": offsets decrease at batch row ", b));
      }
    }
    if (static_cast<int64_t>(field.table.size()) % dim_ != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wrong shape: field ", f, "'s table has ", field.table.size(),
          " values, not a multiple of the embedding dimension ", dim_));
    }
    const int64_t table_rows = static_cast<int64_t>(field.table.size()) / dim_;
    for (size_t j = 0; j < field.rows.size(); ++j) {
      if (field.rows[j] < 0 || field.rows[j] >= table_rows) {
        return absl::InvalidArgumentError(
            absl::StrCat("field ", f, ": id ", j, " is row ", field.rows[j],
                         " of a table of ", table_rows, " rows"));
      }
    }
  }
  return absl::OkStatus();
}

void CtrModel::Reserve(const CtrModelInput& in) {
  const int64_t batch = in.batch;
  if (batch > capacity_) {
    capacity_ = batch;
    dense_ = DeviceArray<float>(backend_, AtLeastOne(batch * num_dense_));
    labels_ = DeviceArray<float>(backend_, batch);
    pre_.clear();
    post_.clear();
    delta_.clear();
    for (size_t l = 1; l < widths_.size(); ++l) {
      pre_.emplace_back(backend_, batch * widths_[l]);
      post_.emplace_back(backend_, batch * widths_[l]);
      delta_.emplace_back(backend_, batch * widths_[l]);
    }
    for (FieldBuffers& buf : fields_) {
      buf.offsets = DeviceArray<int64_t>(backend_, batch + 1);
      buf.bag = DeviceArray<float>(backend_, batch * dim_);
      buf.dbag = DeviceArray<float>(backend_, batch * dim_);
    }
  }
  for (int f = 0; f < num_fields_; ++f) {
    FieldBuffers& buf = fields_[f];
    const int64_t table = static_cast<int64_t>(in.fields[f].table.size());
    if (table > buf.table_capacity || buf.table.data() == nullptr) {
      buf.table_capacity = AtLeastOne(table);
      buf.table = DeviceArray<float>(backend_, buf.table_capacity);
    }
    const int64_t ids = static_cast<int64_t>(in.fields[f].rows.size());
    if (ids > buf.ids_capacity || buf.rows.data() == nullptr) {
      buf.ids_capacity = AtLeastOne(ids);
      buf.rows = DeviceArray<int64_t>(backend_, buf.ids_capacity);
      buf.unique = DeviceArray<int64_t>(backend_, buf.ids_capacity);
      buf.drows = DeviceArray<float>(backend_, buf.ids_capacity * dim_);
      buf.summed = DeviceArray<float>(backend_, buf.ids_capacity * dim_);
    }
  }
}

void CtrModel::Forward(const CtrModelInput& in, bool training, uint64_t seed) {
  Reserve(in);
  const int64_t batch = in.batch;
  backend_->CopyToDevice(in.labels.data(), labels_.data(),
                         batch * sizeof(float));
  backend_->CopyToDevice(in.dense.data(), dense_.data(),
                         in.dense.size() * sizeof(float));
  const int64_t out0 = widths_[1];
  float* z0 = pre_[0].data();
  const float* kernel0 = params_[0].data();
  // The first layer multiplies the concatenation [bag_0 .. bag_{F-1},
  // dense] by the kernel, i.e. sums each block times its block of rows of
  // the kernel, so the concatenation is never built.
  for (int f = 0; f < num_fields_; ++f) {
    const CtrFieldInput& field = in.fields[f];
    FieldBuffers& buf = fields_[f];
    backend_->CopyToDevice(field.table.data(), buf.table.data(),
                           field.table.size() * sizeof(float));
    backend_->CopyToDevice(field.offsets.data(), buf.offsets.data(),
                           (batch + 1) * sizeof(int64_t));
    backend_->CopyToDevice(field.rows.data(), buf.rows.data(),
                           field.rows.size() * sizeof(int64_t));
    backend_->EmbeddingBagForward(buf.table.data(), dim_, buf.offsets.data(),
                                  buf.rows.data(), batch, combiner_,
                                  buf.bag.data());
    backend_->Gemm(false, false, batch, out0, dim_, 1.0f, buf.bag.data(),
                   kernel0 + f * dim_ * out0, f == 0 ? 0.0f : 1.0f, z0);
  }
  if (num_dense_ > 0) {
    backend_->Gemm(false, false, batch, out0, num_dense_, 1.0f, dense_.data(),
                   kernel0 + num_fields_ * dim_ * out0, 1.0f, z0);
  }
  const size_t layers = widths_.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const int64_t fan_in = widths_[l], fan_out = widths_[l + 1];
    float* z = pre_[l].data();
    if (l > 0) {
      const float* x =
          (training && dropout_ > 0) ? post_[l - 1].data() : pre_[l - 1].data();
      backend_->Gemm(false, false, batch, fan_out, fan_in, 1.0f, x,
                     params_[2 * l].data(), 0.0f, z);
    }
    backend_->AddBias(params_[2 * l + 1].data(), batch, fan_out, z);
    if (l + 1 == layers) break;  // z holds the logits
    backend_->Relu(batch * fan_out, z);
    if (training && dropout_ > 0) {
      float* h = post_[l].data();
      backend_->CopyOnDevice(z, h, batch * fan_out * sizeof(float));
      backend_->Dropout(DeriveSeed(seed, l), dropout_, batch * fan_out, h);
    }
  }
}

absl::StatusOr<CtrBatchResult> CtrModel::Finish(
    const CtrModelInput& in, double loss_sum,
    std::vector<float>* probabilities) {
  if (probabilities != nullptr) {
    probabilities->resize(in.batch);
    backend_->CopyToHost(pre_.back().data(), probabilities->data(),
                         in.batch * sizeof(float));
    for (float& p : *probabilities) p = 1.0f / (1.0f + std::exp(-p));
  }
  if (absl::Status s = backend_->Synchronize(); !s.ok()) return s;
  CtrBatchResult result;
  result.loss_sum = loss_sum;
  result.examples = in.batch;
  return result;
}

absl::StatusOr<CtrBatchResult> CtrModel::TrainStep(
    const CtrModelInput& in, uint64_t seed,
    absl::Span<const absl::Span<float>> dense_grads,
    std::vector<CtrSparseGrad>* sparse_grads,
    std::vector<float>* probabilities) {
  if (absl::Status s = CheckInput(in); !s.ok()) return s;
  if (sparse_grads == nullptr) {
    return absl::InvalidArgumentError("TrainStep needs sparse_grads");
  }
  if (absl::Status s = CheckGradientBuffers(dense_variables(), "dense ",
                                            dense_grads, grads_);
      !s.ok()) {
    return s;
  }
  const bool dropout = dropout_ > 0;
  Forward(in, /*training=*/true, seed);
  const int64_t batch = in.batch;
  const size_t layers = widths_.size() - 1;
  float* delta = delta_[layers - 1].data();
  const double loss_sum = backend_->SigmoidCrossEntropy(
      pre_[layers - 1].data(), labels_.data(), batch, 1, delta);
  for (size_t l = layers; l-- > 1;) {
    const int64_t fan_in = widths_[l], fan_out = widths_[l + 1];
    const float* x = dropout ? post_[l - 1].data() : pre_[l - 1].data();
    backend_->Gemm(true, false, fan_in, fan_out, batch, 1.0f, x, delta, 0.0f,
                   grads_[2 * l].data());
    backend_->BiasGrad(delta, batch, fan_out, grads_[2 * l + 1].data());
    float* prev = delta_[l - 1].data();
    backend_->Gemm(false, true, batch, fan_in, fan_out, 1.0f, delta,
                   params_[2 * l].data(), 0.0f, prev);
    if (dropout) {
      backend_->Dropout(DeriveSeed(seed, l - 1), dropout_, batch * fan_in,
                        prev);
    }
    backend_->ReluGrad(pre_[l - 1].data(), batch * fan_in, prev);
    delta = prev;
  }
  // The first layer, block by block as in Forward.
  const int64_t out0 = widths_[1];
  float* dkernel0 = grads_[0].data();
  const float* kernel0 = params_[0].data();
  backend_->BiasGrad(delta, batch, out0, grads_[1].data());
  if (num_dense_ > 0) {
    backend_->Gemm(true, false, num_dense_, out0, batch, 1.0f, dense_.data(),
                   delta, 0.0f, dkernel0 + num_fields_ * dim_ * out0);
  }
  sparse_grads->resize(num_fields_);
  for (int f = 0; f < num_fields_; ++f) {
    FieldBuffers& buf = fields_[f];
    backend_->Gemm(true, false, dim_, out0, batch, 1.0f, buf.bag.data(), delta,
                   0.0f, dkernel0 + f * dim_ * out0);
    backend_->Gemm(false, true, batch, dim_, out0, 1.0f, delta,
                   kernel0 + f * dim_ * out0, 0.0f, buf.dbag.data());
    const int64_t ids = static_cast<int64_t>(in.fields[f].rows.size());
    backend_->EmbeddingBagBackward(buf.dbag.data(), dim_, buf.offsets.data(),
                                   batch, combiner_, buf.drows.data());
    const int64_t unique =
        backend_->ReduceSparseGrad(buf.rows.data(), buf.drows.data(), ids, dim_,
                                   buf.unique.data(), buf.summed.data());
    CtrSparseGrad& grad = (*sparse_grads)[f];
    grad.rows.resize(unique);
    grad.values.resize(unique * dim_);
    backend_->CopyToHost(buf.unique.data(), grad.rows.data(),
                         unique * sizeof(int64_t));
    backend_->CopyToHost(buf.summed.data(), grad.values.data(),
                         unique * dim_ * sizeof(float));
  }
  for (size_t i = 0; i < dense_grads.size(); ++i) {
    backend_->CopyToHost(grads_[i].data(), dense_grads[i].data(),
                         dense_grads[i].size() * sizeof(float));
  }
  return Finish(in, loss_sum, probabilities);
}

absl::StatusOr<CtrBatchResult> CtrModel::Evaluate(
    const CtrModelInput& in, std::vector<float>* probabilities) {
  if (absl::Status s = CheckInput(in); !s.ok()) return s;
  Forward(in, /*training=*/false, 0);
  const size_t layers = widths_.size() - 1;
  const double loss_sum = backend_->SigmoidCrossEntropy(
      pre_[layers - 1].data(), labels_.data(), in.batch, 1, nullptr);
  return Finish(in, loss_sum, probabilities);
}

}  // namespace tessera
