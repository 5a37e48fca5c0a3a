#include "worker/mlp_model.h"

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

}  // namespace

absl::StatusOr<std::unique_ptr<MlpModel>> MlpModel::Create(
    const ModelConfig& config, Backend* backend) {
  absl::StatusOr<std::vector<VariableDef>> vars = ModelVariables(config, 0);
  if (!vars.ok()) return vars.status();
  std::vector<int64_t> widths = {config.input_dim()};
  for (int units : config.hidden_units()) widths.push_back(units);
  widths.push_back(config.num_classes());
  return std::unique_ptr<MlpModel>(new MlpModel(
      *std::move(vars), std::move(widths), config.dropout(), backend));
}

MlpModel::MlpModel(std::vector<VariableDef> variables,
                   std::vector<int64_t> widths, float dropout, Backend* backend)
    : variables_(std::move(variables)),
      widths_(std::move(widths)),
      dropout_(dropout),
      backend_(backend) {
  for (const VariableDef& v : variables_) {
    params_.emplace_back(backend_, NumElements(v.shape));
    grads_.emplace_back(backend_, NumElements(v.shape));
  }
}

absl::Status MlpModel::SetParameters(
    absl::Span<const absl::Span<const float>> values) {
  return UploadParameters(backend_, variables_, "", values, params_);
}

absl::Status MlpModel::CheckLabels(const int32_t* labels, int64_t batch) const {
  if (batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch needs at least one example, got ", batch));
  }
  for (int64_t i = 0; i < batch; ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", labels[i], " of batch row ", i,
                       " is outside [0, ", num_classes(), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status MlpModel::CheckBatch(absl::Span<const float> x,
                                  absl::Span<const int32_t> labels) const {
  const int64_t batch = static_cast<int64_t>(labels.size());
  // Divides rather than multiplies, so no size can overflow.
  if (static_cast<int64_t>(x.size()) % input_dim() != 0 ||
      static_cast<int64_t>(x.size()) / input_dim() != batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wrong shape: ", x.size(), " features for ", batch,
        " labels, the model expects ", input_dim(), " per example"));
  }
  return CheckLabels(labels.data(), batch);
}

void MlpModel::Reserve(int64_t batch) {
  if (batch <= capacity_) return;
  capacity_ = batch;
  input_ = DeviceArray<float>(backend_, batch * input_dim());
  labels_ = DeviceArray<int32_t>(backend_, batch);
  pre_.clear();
  post_.clear();
  delta_.clear();
  for (size_t l = 1; l < widths_.size(); ++l) {
    pre_.emplace_back(backend_, batch * widths_[l]);
    post_.emplace_back(backend_, batch * widths_[l]);
    delta_.emplace_back(backend_, batch * widths_[l]);
  }
}

void MlpModel::Forward(const float* x, const int32_t* labels, int64_t batch,
                       bool training, uint64_t seed) {
  Reserve(batch);
  backend_->CopyToDevice(x, input_.data(), batch * input_dim() * sizeof(float));
  backend_->CopyToDevice(labels, labels_.data(), batch * sizeof(int32_t));
  const size_t layers = widths_.size() - 1;
  const float* in = input_.data();
  for (size_t l = 0; l < layers; ++l) {
    const int64_t fan_in = widths_[l], fan_out = widths_[l + 1];
    float* z = pre_[l].data();
    backend_->Gemm(false, false, batch, fan_out, fan_in, 1.0f, in,
                   params_[2 * l].data(), 0.0f, z);
    backend_->AddBias(params_[2 * l + 1].data(), batch, fan_out, z);
    if (l + 1 == layers) break;  // z holds the logits
    backend_->Relu(batch * fan_out, z);
    if (training && dropout_ > 0) {
      float* h = post_[l].data();
      backend_->CopyOnDevice(z, h, batch * fan_out * sizeof(float));
      backend_->Dropout(DeriveSeed(seed, l), dropout_, batch * fan_out, h);
      in = h;
    } else {
      in = z;
    }
  }
}

absl::StatusOr<BatchResult> MlpModel::TrainStep(
    const float* x, const int32_t* labels, int64_t batch, uint64_t seed,
    absl::Span<const absl::Span<float>> grads) {
  // An empty or negative batch is refused before it becomes a span size.
  if (batch < 1) return CheckLabels(labels, batch);
  return TrainStep(absl::MakeConstSpan(x, batch * input_dim()),
                   absl::MakeConstSpan(labels, batch), seed, grads);
}

absl::StatusOr<BatchResult> MlpModel::TrainStep(
    absl::Span<const float> x_span, absl::Span<const int32_t> labels_span,
    uint64_t seed, absl::Span<const absl::Span<float>> grads) {
  if (absl::Status s = CheckBatch(x_span, labels_span); !s.ok()) return s;
  const float* x = x_span.data();
  const int32_t* labels = labels_span.data();
  const int64_t batch = static_cast<int64_t>(labels_span.size());
  if (absl::Status s = CheckGradientBuffers(variables_, "", grads, grads_);
      !s.ok()) {
    return s;
  }
  const bool dropout = dropout_ > 0;
  Forward(x, labels, batch, /*training=*/true, seed);
  const size_t layers = widths_.size() - 1;
  BatchResult result;
  result.examples = batch;
  float* delta = delta_[layers - 1].data();
  result.loss_sum = backend_->SoftmaxCrossEntropy(
      pre_[layers - 1].data(), labels_.data(), batch, num_classes(), delta,
      &result.correct);
  for (size_t l = layers; l-- > 0;) {
    const int64_t fan_in = widths_[l], fan_out = widths_[l + 1];
    const float* in =
        l == 0 ? input_.data()
               : (dropout ? post_[l - 1].data() : pre_[l - 1].data());
    backend_->Gemm(true, false, fan_in, fan_out, batch, 1.0f, in, delta, 0.0f,
                   grads_[2 * l].data());
    backend_->BiasGrad(delta, batch, fan_out, grads_[2 * l + 1].data());
    if (l == 0) break;
    float* prev = delta_[l - 1].data();
    backend_->Gemm(false, true, batch, fan_in, fan_out, 1.0f, delta,
                   params_[2 * l].data(), 0.0f, prev);
    if (dropout)
      backend_->Dropout(DeriveSeed(seed, l - 1), dropout_, batch * fan_in,
                        prev);
    backend_->ReluGrad(pre_[l - 1].data(), batch * fan_in, prev);
    delta = prev;
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    backend_->CopyToHost(grads_[i].data(), grads[i].data(),
                         grads[i].size() * sizeof(float));
  }
  return result;
}

absl::StatusOr<BatchResult> MlpModel::Evaluate(const float* x,
                                               const int32_t* labels,
                                               int64_t batch) {
  // An empty or negative batch is refused before it becomes a span size.
  if (batch < 1) return CheckLabels(labels, batch);
  return Evaluate(absl::MakeConstSpan(x, batch * input_dim()),
                  absl::MakeConstSpan(labels, batch));
}

absl::StatusOr<BatchResult> MlpModel::Evaluate(
    absl::Span<const float> x_span, absl::Span<const int32_t> labels_span) {
  if (absl::Status s = CheckBatch(x_span, labels_span); !s.ok()) return s;
  const float* x = x_span.data();
  const int32_t* labels = labels_span.data();
  const int64_t batch = static_cast<int64_t>(labels_span.size());
  Forward(x, labels, batch, /*training=*/false, 0);
  const size_t layers = widths_.size() - 1;
  BatchResult result;
  result.examples = batch;
  result.loss_sum = backend_->SoftmaxCrossEntropy(
      pre_[layers - 1].data(), labels_.data(), batch, num_classes(), nullptr,
      &result.correct);
  return result;
}

}  // namespace tessera
