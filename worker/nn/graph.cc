#include "worker/nn/graph.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

// Turns the loss head's logits into what a prediction returns, on the
// host: probabilities for the cross-entropy heads, values for regression.
void Predict(LossDef::Kind loss, int64_t rows, int64_t cols, float* out) {
  if (loss == LossDef::SIGMOID_CROSS_ENTROPY) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      out[i] = 1.0f / (1.0f + std::exp(-out[i]));
    }
  } else if (loss == LossDef::SOFTMAX_CROSS_ENTROPY) {
    for (int64_t r = 0; r < rows; ++r) {
      float* row = out + r * cols;
      const float top = *std::max_element(row, row + cols);
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += row[c] = std::exp(row[c] - top);
      for (int64_t c = 0; c < cols; ++c)
        row[c] = static_cast<float>(row[c] / sum);
    }
  }
}

}  // namespace

struct Graph::Names {
  absl::flat_hash_map<std::string, int> variable, table, tensor, sparse;
};

void Graph::AddVariables(const ModelGraph& model, Names* names) {
  for (const VariableDef& var : model.variables) {
    if (var.sparse) {
      names->table[var.name] = static_cast<int>(tables_.size());
      tables_.push_back(var);
      table_reads_.emplace_back();
      TableBuffers buffers;
      buffers.dim = var.shape.size() > 1 ? var.shape[1] : 1;
      table_buffers_.push_back(std::move(buffers));
      continue;
    }
    names->variable[var.name] = static_cast<int>(variables_.size());
    variables_.push_back(var);
    values_.emplace_back(backend_, NumElements(var.shape));
    grads_.emplace_back(backend_, NumElements(var.shape));
  }
}

void Graph::AddTensor(const ModelGraph& model, const std::string& name,
                      bool input, Names* names) {
  names->tensor[name] = static_cast<int>(tensors_.size());
  Tensor t;
  t.size = NumElements(model.tensors.at(name).shape);
  t.model_input = input;
  tensors_.push_back(std::move(t));
}

void Graph::AddInputs(const ModelGraph& model, Names* names) {
  for (const InputDef& in : model_.inputs()) {
    if (in.has_sparse()) {
      names->sparse[in.name()] = static_cast<int>(sparse_names_.size());
      sparse_names_.push_back(in.name());
      sparse_.emplace_back();
      continue;
    }
    AddTensor(model, in.name(), true, names);
    dense_inputs_.push_back(names->tensor[in.name()]);
    dense_names_.push_back(in.name());
  }
}

void Graph::AddEmbeddingBag(const LayerDef& def, const Names& names) {
  // Shape inference let embedding_bag read only sparse inputs.
  const int fields = def.inputs_size();
  for (int k = 0; k < fields; ++k) {
    Embedding e;
    e.input = names.sparse.at(def.inputs(k));
    e.table = names.table.at(def.embedding_bag().table());
    e.output = names.tensor.at(def.output());
    e.dim = def.embedding_bag().dim();
    e.column = k * e.dim;
    e.stride = fields * e.dim;
    e.combiner = def.embedding_bag().combiner() == MEAN
                     ? Backend::Combiner::kMean
                     : Backend::Combiner::kSum;
    table_reads_[e.table].push_back(e.input);
    embeddings_.push_back(e);
  }
}

absl::Status Graph::AddLayer(const ModelGraph& model, const LayerDef& def,
                             int* dropouts, Names* names) {
  LayerSpec spec;
  spec.def = &def;
  spec.output = model.tensors.at(def.output()).shape;
  Node node;
  for (const std::string& in : def.inputs()) {
    spec.inputs.push_back(model.tensors.at(in));
    node.inputs.push_back(names->tensor[in]);
    ++tensors_[names->tensor[in]].readers;
  }
  for (const LayerVariable& v : LayerVariables(def, spec.inputs)) {
    const int k = names->variable.at(v.name);
    node.params.push_back(k);
    spec.params.values.push_back(values_[k].data());
    spec.params.grads.push_back(grads_[k].data());
  }
  if (def.has_dropout()) spec.dropout_index = (*dropouts)++;
  absl::StatusOr<std::unique_ptr<Layer>> layer = CreateLayer(spec, backend_);
  if (!layer.ok()) return layer.status();
  node.layer = *std::move(layer);
  node.output = names->tensor[def.output()];
  nodes_.push_back(std::move(node));
  return absl::OkStatus();
}

// A tensor read more than once gets one gradient buffer per read, summed
// into its own after each reader's backward pass.
void Graph::AssignGradientSlots() {
  for (Node& node : nodes_) {
    for (int t : node.inputs) {
      const Tensor& tensor = tensors_[t];
      if (tensor.model_input) {
        node.slot.push_back(-1);
      } else if (tensor.readers == 1) {
        node.slot.push_back(-2);  // the tensor's own gradient buffer
      } else {
        node.slot.push_back(static_cast<int>(slot_sizes_.size()));
        slot_sizes_.push_back(tensor.size);
      }
    }
  }
}

absl::StatusOr<std::unique_ptr<Graph>> Graph::Create(const ModelGraph& model,
                                                     Backend* backend) {
  std::unique_ptr<Graph> graph(new Graph(backend));
  graph->model_ = model.resolved;
  Names names;
  graph->AddVariables(model, &names);
  graph->AddInputs(model, &names);
  int dropouts = 0;
  for (int i : model.order) {
    const LayerDef& def = graph->model_.layers(i);
    graph->AddTensor(model, def.output(), false, &names);
    if (def.has_embedding_bag()) {
      graph->AddEmbeddingBag(def, names);
      continue;
    }
    if (absl::Status s = graph->AddLayer(model, def, &dropouts, &names);
        !s.ok()) {
      return s;
    }
  }
  graph->AssignGradientSlots();
  graph->loss_input_ = names.tensor.at(graph->model_.loss().input());
  return graph;
}

absl::Status Graph::CheckParameters(
    absl::Span<const absl::Span<const float>> values) const {
  if (values.size() != variables_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model has ", variables_.size(), " variables, got ", values.size()));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (static_cast<int64_t>(values[i].size()) != values_[i].size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("wrong shape: variable ", variables_[i].name, " has ",
                       values_[i].size(), " elements, got ", values[i].size()));
    }
  }
  return absl::OkStatus();
}

absl::Status Graph::SetParameters(
    absl::Span<const absl::Span<const float>> values) {
  if (absl::Status s = CheckParameters(values); !s.ok()) return s;
  for (size_t i = 0; i < values.size(); ++i) {
    backend_->CopyToDevice(values[i].data(), values_[i].data(),
                           values[i].size() * sizeof(float));
  }
  return absl::OkStatus();
}

namespace {

std::vector<absl::Span<float>> HostSpans(
    const Backend& backend, const std::vector<DeviceArray<float>>& arrays) {
  std::vector<absl::Span<float>> spans;
  if (!backend.device_is_host()) return spans;
  for (const DeviceArray<float>& a : arrays) {
    spans.emplace_back(a.data(), a.size());
  }
  return spans;
}

}  // namespace

std::vector<absl::Span<float>> Graph::HostVisibleValues() {
  return HostSpans(*backend_, values_);
}

std::vector<absl::Span<float>> Graph::HostVisibleGradients() {
  return HostSpans(*backend_, grads_);
}

absl::Status Graph::PrepareStaging() {
  if (staged_.empty()) {
    for (const DeviceArray<float>& v : values_) {
      staged_.emplace_back(backend_, v.size());
    }
  }
  return backend_->status();
}

absl::Status Graph::StageParameters(
    absl::Span<const absl::Span<const float>> values) {
  if (staged_.size() != values_.size()) {
    return absl::FailedPreconditionError(
        "StageParameters before PrepareStaging");
  }
  if (absl::Status s = CheckParameters(values); !s.ok()) return s;
  for (size_t i = 0; i < values.size(); ++i) {
    backend_->Upload(values[i].data(), staged_[i].data(),
                     values[i].size() * sizeof(float));
  }
  return absl::OkStatus();
}

void Graph::UseStagedParameters() {
  backend_->AwaitUploads();
  // A device-side copy, not a swap of buffers: the layers hold the
  // parameters' addresses.
  for (size_t i = 0; i < staged_.size(); ++i) {
    backend_->CopyOnDevice(staged_[i].data(), values_[i].data(),
                           values_[i].size() * sizeof(float));
  }
  backend_->ReleaseUploads();
}

void Graph::DiscardStagedParameters() {
  // Ordering the uploads before the ops that follow is enough: the next
  // step waits for those ops, and so for the uploads, before the host
  // buffers they read are written again.
  backend_->AwaitUploads();
  backend_->ReleaseUploads();
}

absl::Status Graph::CheckBatch(const GraphBatch& batch) const {
  const int64_t n = batch.size;
  if (n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch needs at least one example, got ", n));
  }
  if (batch.dense.size() != dense_inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", dense_inputs_.size(),
                     " dense inputs, the batch ", batch.dense.size()));
  }
  for (size_t i = 0; i < dense_inputs_.size(); ++i) {
    const int64_t per = tensors_[dense_inputs_[i]].size;
    const int64_t got = static_cast<int64_t>(batch.dense[i].size());
    // Divides rather than multiplies, so no size can overflow.
    if (got % per != 0 || got / per != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("wrong shape: input \"", dense_names_[i], "\" has ", got,
                       " values for ", n, " examples, the model expects ", per,
                       " per example"));
    }
  }
  if (absl::Status s = CheckSparse(batch); !s.ok()) return s;
  const LabelDef& label = model_.label();
  if (label.kind() == LabelDef::CLASS_INDEX) {
    if (static_cast<int64_t>(batch.class_labels.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch of ", n, " examples has ",
                       batch.class_labels.size(), " labels"));
    }
    for (int64_t b = 0; b < n; ++b) {
      if (batch.class_labels[b] < 0 ||
          batch.class_labels[b] >= label.num_classes()) {
        return absl::InvalidArgumentError(
            absl::StrCat("label ", batch.class_labels[b], " of batch row ", b,
                         " is outside [0, ", label.num_classes(), ")"));
      }
    }
    return absl::OkStatus();
  }
  if (static_cast<int64_t>(batch.labels.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch of ", n, " examples has ", batch.labels.size(), " labels"));
  }
  for (int64_t b = 0; b < n; ++b) {
    const float y = batch.labels[b];
    const bool ok = label.kind() == LabelDef::BINARY ? (y >= 0.0f && y <= 1.0f)
                                                     : std::isfinite(y);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", y, " of batch row ", b,
                       label.kind() == LabelDef::BINARY ? " is outside [0, 1]"
                                                        : " is not finite"));
    }
  }
  return absl::OkStatus();
}

absl::Status Graph::CheckSparse(const GraphBatch& batch) const {
  const int64_t n = batch.size;
  if (batch.sparse_offsets.size() != sparse_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", sparse_.size(), " sparse inputs, the batch ",
                     batch.sparse_offsets.size()));
  }
  std::vector<int64_t> ids(sparse_.size());
  for (size_t i = 0; i < sparse_.size(); ++i) {
    absl::Span<const int64_t> offsets = batch.sparse_offsets[i];
    if (static_cast<int64_t>(offsets.size()) != n + 1 || offsets[0] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse input \"", sparse_names_[i], "\": offsets must ", "have ",
          n + 1, " entries starting at 0, got ", offsets.size()));
    }
    for (int64_t b = 0; b < n; ++b) {
      if (offsets[b + 1] < offsets[b]) {
        return absl::InvalidArgumentError(
            absl::StrCat("sparse input \"", sparse_names_[i],
                         "\": offsets decrease at batch row ", b));
      }
    }
    ids[i] = offsets[n];
  }
  if (batch.table_rows.size() != tables_.size() ||
      batch.table_positions.size() != tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", tables_.size(), " tables, the batch brings ",
                     batch.table_rows.size(), " tables' rows and ",
                     batch.table_positions.size(), " position lists"));
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    const int64_t dim = table_buffers_[t].dim;
    if (static_cast<int64_t>(batch.table_rows[t].size()) % dim != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wrong shape: table \"", tables_[t].name, "\" rows have ",
          batch.table_rows[t].size(), " values, not a multiple of dim ", dim));
    }
    const int64_t rows = static_cast<int64_t>(batch.table_rows[t].size()) / dim;
    int64_t expected = 0;
    for (int input : table_reads_[t]) expected += ids[input];
    absl::Span<const int64_t> positions = batch.table_positions[t];
    if (static_cast<int64_t>(positions.size()) != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table \"", tables_[t].name, "\": the batch's inputs have ", expected,
          " ids, got ", positions.size(), " positions"));
    }
    for (size_t j = 0; j < positions.size(); ++j) {
      if (positions[j] < 0 || positions[j] >= rows) {
        return absl::InvalidArgumentError(
            absl::StrCat("table \"", tables_[t].name, "\": id ", j, " is row ",
                         positions[j], " of ", rows, " rows"));
      }
    }
  }
  return absl::OkStatus();
}

void Graph::Reserve(int64_t batch) {
  if (batch <= capacity_) return;
  capacity_ = batch;
  for (Tensor& t : tensors_) {
    t.value = DeviceArray<float>(backend_, batch * t.size);
    if (!t.model_input) t.grad = DeviceArray<float>(backend_, batch * t.size);
  }
  slots_.clear();
  for (int64_t size : slot_sizes_) slots_.emplace_back(backend_, batch * size);
  class_labels_ = DeviceArray<int32_t>(backend_, batch);
  labels_ = DeviceArray<float>(backend_, batch);
  for (DeviceArray<int64_t>& offsets : sparse_) {
    offsets = DeviceArray<int64_t>(backend_, batch + 1);
  }
}

namespace {

int64_t AtLeastOne(int64_t n) { return n > 0 ? n : 1; }

}  // namespace

void Graph::ForwardEmbeddings(const GraphBatch& batch) {
  const int64_t n = batch.size;
  for (size_t i = 0; i < sparse_.size(); ++i) {
    backend_->CopyToDevice(batch.sparse_offsets[i].data(), sparse_[i].data(),
                           (n + 1) * sizeof(int64_t));
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    TableBuffers& buf = table_buffers_[t];
    const int64_t values = static_cast<int64_t>(batch.table_rows[t].size());
    if (values > buf.rows_capacity || buf.values.data() == nullptr) {
      buf.rows_capacity = AtLeastOne(values);
      buf.values = DeviceArray<float>(backend_, buf.rows_capacity);
    }
    buf.ids = static_cast<int64_t>(batch.table_positions[t].size());
    if (buf.ids > buf.ids_capacity || buf.positions.data() == nullptr) {
      buf.ids_capacity = AtLeastOne(buf.ids);
      buf.positions = DeviceArray<int64_t>(backend_, buf.ids_capacity);
      buf.unique = DeviceArray<int64_t>(backend_, buf.ids_capacity);
      buf.drows = DeviceArray<float>(backend_, buf.ids_capacity * buf.dim);
      buf.summed = DeviceArray<float>(backend_, buf.ids_capacity * buf.dim);
    }
    backend_->CopyToDevice(batch.table_rows[t].data(), buf.values.data(),
                           values * sizeof(float));
    backend_->CopyToDevice(batch.table_positions[t].data(),
                           buf.positions.data(), buf.ids * sizeof(int64_t));
  }
  std::vector<int64_t> next(tables_.size(), 0);
  for (Embedding& e : embeddings_) {
    TableBuffers& buf = table_buffers_[e.table];
    e.start = next[e.table];
    next[e.table] += batch.sparse_offsets[e.input][n];
    backend_->EmbeddingBagForward(
        buf.values.data(), e.dim, sparse_[e.input].data(),
        buf.positions.data() + e.start, n, e.combiner,
        tensors_[e.output].value.data() + e.column, e.stride);
  }
}

void Graph::Forward(const GraphBatch& batch, bool training, uint64_t seed) {
  Reserve(batch.size);
  for (size_t i = 0; i < dense_inputs_.size(); ++i) {
    backend_->CopyToDevice(batch.dense[i].data(),
                           tensors_[dense_inputs_[i]].value.data(),
                           batch.dense[i].size() * sizeof(float));
  }
  if (model_.label().kind() == LabelDef::CLASS_INDEX) {
    backend_->CopyToDevice(batch.class_labels.data(), class_labels_.data(),
                           batch.size * sizeof(int32_t));
  } else {
    backend_->CopyToDevice(batch.labels.data(), labels_.data(),
                           batch.size * sizeof(float));
  }
  ForwardEmbeddings(batch);
  const StepContext ctx{backend_, batch.size, training, seed};
  std::vector<const float*> in;
  for (Node& node : nodes_) {
    in.clear();
    for (int t : node.inputs) in.push_back(tensors_[t].value.data());
    node.layer->Forward(ctx, in, tensors_[node.output].value.data());
  }
}

double Graph::Loss(const GraphBatch& batch, bool gradient, int64_t* correct) {
  const Tensor& t = tensors_[loss_input_];
  float* d = gradient ? tensors_[loss_input_].grad.data() : nullptr;
  const int64_t n = batch.size;
  switch (model_.loss().kind()) {
    case LossDef::SOFTMAX_CROSS_ENTROPY:
      return backend_->SoftmaxCrossEntropy(t.value.data(), class_labels_.data(),
                                           n, t.size, d, correct);
    case LossDef::SIGMOID_CROSS_ENTROPY: {
      const double loss = backend_->SigmoidCrossEntropy(
          t.value.data(), labels_.data(), n, t.size, d);
      // A logit of 0 or more is a predicted 1.
      std::vector<float> logits(n);
      backend_->CopyToHost(t.value.data(), logits.data(), n * sizeof(float));
      *correct = 0;
      for (int64_t b = 0; b < n; ++b) {
        *correct += (logits[b] >= 0.0f) == (batch.labels[b] >= 0.5f);
      }
      return loss;
    }
    default:
      *correct = 0;
      return backend_->MeanSquaredError(t.value.data(), labels_.data(), n,
                                        t.size, d);
  }
}

absl::StatusOr<GraphResult> Graph::TrainStep(
    const GraphBatch& batch, uint64_t seed,
    absl::Span<const absl::Span<float>> grads,
    std::vector<TableGradient>* table_grads) {
  if (absl::Status s = CheckBatch(batch); !s.ok()) return s;
  if (!tables_.empty() && table_grads == nullptr) {
    return absl::InvalidArgumentError(
        "the model has embedding tables: TrainStep needs table_grads");
  }
  if (grads.size() != variables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", variables_.size(), " variables, got ",
                     grads.size(), " gradient buffers"));
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (static_cast<int64_t>(grads[i].size()) != grads_[i].size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wrong shape: gradient buffer of ", variables_[i].name, " has ",
          grads[i].size(), " elements, need ", grads_[i].size()));
    }
  }
  const GraphResult result = ForwardBackward(batch, seed, table_grads);
  for (size_t i = 0; i < grads.size(); ++i) {
    backend_->CopyToHost(grads_[i].data(), grads[i].data(),
                         grads[i].size() * sizeof(float));
  }
  if (absl::Status s = backend_->Synchronize(); !s.ok()) return s;
  return result;
}

int64_t Graph::dense_gradient_size() const {
  int64_t n = 0;
  for (const DeviceArray<float>& g : grads_) n += g.size();
  return n;
}

absl::StatusOr<GraphResult> Graph::TrainStepOnDevice(const GraphBatch& batch,
                                                     uint64_t seed, float scale,
                                                     float* device_grads) {
  if (absl::Status s = CheckBatch(batch); !s.ok()) return s;
  if (!tables_.empty()) {
    return absl::InvalidArgumentError(
        "the model has embedding tables: their gradients go to the host "
        "(TrainStep)");
  }
  const GraphResult result = ForwardBackward(batch, seed, nullptr);
  // One pass that scales and packs: alpha * x with beta 0 is one multiply
  // per element, the same bits as scaling on the host.
  float* out = device_grads;
  for (const DeviceArray<float>& g : grads_) {
    backend_->Axpby(g.size(), scale, g.data(), 0.0f, out);
    out += g.size();
  }
  if (absl::Status s = backend_->status(); !s.ok()) return s;
  return result;
}

GraphResult Graph::ForwardBackward(const GraphBatch& batch, uint64_t seed,
                                   std::vector<TableGradient>* table_grads) {
  Forward(batch, /*training=*/true, seed);
  GraphResult result;
  result.examples = batch.size;
  result.loss_sum = Loss(batch, /*gradient=*/true, &result.correct);
  // Which tensors' gradients this pass has written; a layer whose output
  // gets none (it does not reach the loss) leaves its parameters' zero.
  std::vector<bool> written(tensors_.size(), false);
  written[loss_input_] = true;
  const StepContext ctx{backend_, batch.size, true, seed};
  std::vector<const float*> in;
  std::vector<float*> din;
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    Node& node = *it;
    if (!written[node.output]) {
      for (int k : node.params) {
        // A moving statistic's pushed value came from the forward pass.
        if (variables_[k].update_rule.has_value()) continue;
        backend_->Fill(grads_[k].size(), 0.0f, grads_[k].data());
      }
      continue;
    }
    in.clear();
    din.clear();
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      Tensor& t = tensors_[node.inputs[i]];
      in.push_back(t.value.data());
      din.push_back(node.slot[i] == -1   ? nullptr
                    : node.slot[i] == -2 ? t.grad.data()
                                         : slots_[node.slot[i]].data());
    }
    Tensor& out = tensors_[node.output];
    node.layer->Backward(ctx, in, out.value.data(), out.grad.data(), din);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int t = node.inputs[i];
      if (node.slot[i] == -1) continue;
      if (node.slot[i] >= 0) {
        const int64_t n = batch.size * tensors_[t].size;
        backend_->Axpby(n, 1.0f, din[i], written[t] ? 1.0f : 0.0f,
                        tensors_[t].grad.data());
      }
      written[t] = true;
    }
  }
  for (const Embedding& e : embeddings_) {
    TableBuffers& buf = table_buffers_[e.table];
    float* drows = buf.drows.data() + e.start * e.dim;
    const int64_t ids = batch.sparse_offsets[e.input][batch.size];
    if (!written[e.output]) {
      backend_->Fill(ids * e.dim, 0.0f, drows);
      continue;
    }
    backend_->EmbeddingBagBackward(tensors_[e.output].grad.data() + e.column,
                                   e.dim, sparse_[e.input].data(), batch.size,
                                   e.combiner, drows, e.stride);
  }
  if (table_grads != nullptr) table_grads->resize(tables_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    TableBuffers& buf = table_buffers_[t];
    const int64_t unique = backend_->ReduceSparseGrad(
        buf.positions.data(), buf.drows.data(), buf.ids, buf.dim,
        buf.unique.data(), buf.summed.data());
    TableGradient& grad = (*table_grads)[t];
    grad.rows.resize(unique);
    grad.values.resize(unique * buf.dim);
    backend_->CopyToHost(buf.unique.data(), grad.rows.data(),
                         unique * sizeof(int64_t));
    backend_->CopyToHost(buf.summed.data(), grad.values.data(),
                         unique * buf.dim * sizeof(float));
  }
  return result;
}

absl::StatusOr<GraphResult> Graph::Evaluate(const GraphBatch& batch,
                                            std::vector<float>* predictions) {
  if (absl::Status s = CheckBatch(batch); !s.ok()) return s;
  Forward(batch, /*training=*/false, 0);
  GraphResult result;
  result.examples = batch.size;
  result.loss_sum = Loss(batch, /*gradient=*/false, &result.correct);
  if (predictions != nullptr) {
    const Tensor& t = tensors_[loss_input_];
    const int64_t n = batch.size * t.size;
    predictions->resize(n);
    backend_->CopyToHost(t.value.data(), predictions->data(),
                         n * sizeof(float));
    if (absl::Status s = backend_->Synchronize(); !s.ok()) return s;
    Predict(model_.loss().kind(), batch.size, t.size, predictions->data());
  }
  if (absl::Status s = backend_->Synchronize(); !s.ok()) return s;
  return result;
}

}  // namespace tessera
