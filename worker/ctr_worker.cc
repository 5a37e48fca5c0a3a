#include "worker/ctr_worker.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "absl/strings/str_cat.h"
#include "common/byte_codec.h"
#include "common/counter_rng.h"
#include "glog/logging.h"

namespace tessera {
namespace {

int64_t MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now() - start)
      .count();
}

// Test examples evaluated per forward pass, so activations stay small.
constexpr int64_t kEvaluateSlice = 4096;

int64_t Correct(absl::Span<const float> probabilities,
                absl::Span<const float> labels) {
  int64_t correct = 0;
  for (size_t i = 0; i < probabilities.size(); ++i) {
    correct += (probabilities[i] >= 0.5f) == (labels[i] >= 0.5f);
  }
  return correct;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CtrWorker>> CtrWorker::Create(
    const WorkerConfig& config, std::vector<PsClient*> clients,
    Backend* backend) {
  if (config.data().format() != "criteo") {
    return absl::InvalidArgumentError(
        absl::StrCat("model ctr reads data format \"criteo\", not \"",
                     config.data().format(), "\""));
  }
  if (config.mode() != "async" && config.mode().rfind("ssp", 0) != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "model ctr trains in modes async and ssp only, not ", config.mode()));
  }
  absl::StatusOr<std::unique_ptr<CtrModel>> model =
      CtrModel::Create(config.model(), backend);
  if (!model.ok()) return model.status();
  absl::StatusOr<int64_t> count =
      CountCriteoExamples(config.data().train_path());
  if (!count.ok()) return count.status();
  const int64_t train_size =
      config.data().train_examples() > 0
          ? std::min(*count, config.data().train_examples())
          : *count;
  if (config.train_begin() < 0 || config.train_begin() > config.train_end() ||
      config.train_end() > train_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset shard [", config.train_begin(), ", ", config.train_end(),
        ") is not inside the ", train_size, " training examples"));
  }
  const std::vector<VariableDef>& all = (*model)->variables();
  const std::vector<VariableDef> tables(all.begin(),
                                        all.begin() + (*model)->num_fields());
  const std::vector<VariableDef> dense(all.begin() + (*model)->num_fields(),
                                       all.end());
  absl::StatusOr<std::unique_ptr<SparseParameters>> sparse =
      SparseParameters::Create(tables, config.variables(), clients);
  if (!sparse.ok()) return sparse.status();
  absl::StatusOr<std::unique_ptr<ShardedParameters>> sharded =
      ShardedParameters::Create(dense, config.variables(), clients);
  if (!sharded.ok()) return sharded.status();
  std::unique_ptr<CtrWorker> worker(
      new CtrWorker(config, *std::move(model), *std::move(sparse),
                    *std::move(sharded), train_size));
  absl::StatusOr<const CtrDataset*> own =
      worker->TrainShard(config.train_begin(), config.train_end());
  if (!own.ok()) return own.status();
  worker->own_shard_size_ = (*own)->size;
  return worker;
}

CtrWorker::CtrWorker(const WorkerConfig& config,
                     std::unique_ptr<CtrModel> model,
                     std::unique_ptr<SparseParameters> sparse,
                     std::unique_ptr<ShardedParameters> dense,
                     int64_t train_size)
    : config_(config),
      format_{config.model().num_dense(), config.model().num_fields()},
      model_(std::move(model)),
      sparse_(std::move(sparse)),
      dense_(std::move(dense)),
      train_size_(train_size),
      unique_(model_->num_fields()),
      positions_(model_->num_fields()),
      inputs_(model_->num_fields()),
      push_ids_(model_->num_fields()),
      push_grads_(model_->num_fields()) {}

absl::StatusOr<const CtrDataset*> CtrWorker::TrainShard(int64_t begin,
                                                        int64_t end) {
  auto key = std::make_pair(begin, end);
  auto it = shards_.find(key);
  if (it != shards_.end()) return &it->second;
  absl::StatusOr<CtrDataset> data =
      LoadCriteo(config_.data().train_path(), begin, end - begin, format_);
  if (!data.ok()) return data.status();
  LOG(INFO) << "loaded training examples [" << begin << ", " << end << ")";
  return &shards_.emplace(key, *std::move(data)).first->second;
}

absl::Status CtrWorker::Prepare(const CtrDataset& data,
                                absl::Span<const int64_t> examples,
                                bool pull_dense) {
  if (absl::Status s = GatherCtrBatch(data, examples, &batch_); !s.ok()) {
    return s;
  }
  for (int f = 0; f < model_->num_fields(); ++f) {
    sparse_->Localize(f, batch_.fields[f].ids, &unique_[f], &positions_[f]);
  }
  std::future<absl::Status> dense;
  if (pull_dense) {
    dense =
        std::async(std::launch::async, [this] { return dense_->PullAll(); });
  }
  absl::Status rows = sparse_->Pull(unique_, &rows_);
  if (pull_dense) {
    if (absl::Status s = dense.get(); !s.ok()) return s;
    if (absl::Status s = model_->SetDenseParameters(dense_->values());
        !s.ok()) {
      return s;
    }
  }
  if (!rows.ok()) return rows;
  for (int f = 0; f < model_->num_fields(); ++f) {
    inputs_[f].offsets = batch_.fields[f].offsets;
    inputs_[f].rows = positions_[f];
    inputs_[f].table = rows_[f];
  }
  return absl::OkStatus();
}

CtrModelInput CtrWorker::Input() {
  CtrModelInput input;
  input.batch = batch_.size;
  input.labels = batch_.labels;
  input.dense = batch_.dense;
  input.fields = inputs_;
  return input;
}

absl::Status CtrWorker::RunStep(const StepRequest& request,
                                StepResponse* response) {
  const int64_t begin = request.shard_begin(), end = request.shard_end();
  if (begin < 0 || begin > end || end > train_size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", request.step(), ": dataset shard [", begin, ", ", end,
        ") is not inside the ", train_size_, " training examples"));
  }
  absl::StatusOr<std::vector<int64_t>> ids =
      DecodeRaw<int64_t>(request.example_ids(), "example_ids");
  if (!ids.ok()) return ids.status();
  if (ids->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", request.step(), " names no examples"));
  }
  for (int64_t& id : *ids) {
    if (id < begin || id >= end) {
      return absl::OutOfRangeError(absl::StrCat(
          "step ", request.step(), ": example id ", id,
          " is outside its dataset shard [", begin, ", ", end, ")"));
    }
    id -= begin;  // index into the loaded shard
  }
  absl::StatusOr<const CtrDataset*> data = TrainShard(begin, end);
  if (!data.ok()) return data.status();

  auto t0 = std::chrono::steady_clock::now();
  if (absl::Status s = Prepare(**data, *ids, /*pull_dense=*/true); !s.ok()) {
    return s;
  }
  response->set_pull_us(MicrosSince(t0));

  auto t1 = std::chrono::steady_clock::now();
  absl::StatusOr<CtrBatchResult> result =
      model_->TrainStep(Input(), DeriveSeed(config_.seed(), request.step()),
                        dense_->gradients(), &sparse_grads_, &probabilities_);
  if (!result.ok()) return result.status();
  response->set_compute_us(MicrosSince(t1));
  const int64_t batch = batch_.size;
  response->set_loss(static_cast<float>(result->loss_sum / batch));
  response->set_examples(batch);
  response->set_correct(Correct(probabilities_, batch_.labels));

  auto t2 = std::chrono::steady_clock::now();
  // The model's sparse rows index this batch's distinct rows; push them
  // under their table row ids.
  for (int f = 0; f < model_->num_fields(); ++f) {
    const CtrSparseGrad& grad = sparse_grads_[f];
    push_ids_[f].resize(grad.rows.size());
    for (size_t k = 0; k < grad.rows.size(); ++k) {
      push_ids_[f][k] = unique_[f][grad.rows[k]];
    }
    push_grads_[f].swap(sparse_grads_[f].values);
  }
  std::future<absl::Status> dense_push = std::async(std::launch::async, [this] {
    ShardedParameters::PushOutcome outcome;
    return dense_->PushAll(nullptr, &outcome);
  });
  absl::Status rows = sparse_->Push(push_ids_, push_grads_);
  absl::Status dense = dense_push.get();
  for (int f = 0; f < model_->num_fields(); ++f) {
    push_grads_[f].swap(sparse_grads_[f].values);
  }
  if (!rows.ok()) return rows;
  if (!dense.ok()) return dense;
  response->set_push_us(MicrosSince(t2));
  return absl::OkStatus();
}

absl::Status CtrWorker::Evaluate(const EvaluateRequest& request,
                                 EvaluateResponse* response) {
  if (test_set_ == nullptr) {
    absl::StatusOr<int64_t> n = CountCriteoExamples(config_.data().test_path());
    if (!n.ok()) return n.status();
    const int64_t cap = config_.data().test_examples();
    absl::StatusOr<CtrDataset> test =
        LoadCriteo(config_.data().test_path(), 0,
                   cap > 0 ? std::min(cap, *n) : *n, format_);
    if (!test.ok()) return test.status();
    test_set_ = std::make_unique<CtrDataset>(*std::move(test));
  }
  const int64_t begin = request.begin(), end = request.end();
  if (begin < 0 || begin > end || end > test_set_->size) {
    return absl::OutOfRangeError(absl::StrCat(
        "evaluation range [", begin, ", ", end, ") is not inside the ",
        test_set_->size, " test examples"));
  }
  if (absl::Status s = dense_->PullAll(); !s.ok()) return s;
  if (absl::Status s = model_->SetDenseParameters(dense_->values()); !s.ok()) {
    return s;
  }
  std::vector<int64_t> examples;
  for (int64_t at = begin; at < end; at += kEvaluateSlice) {
    const int64_t n = std::min(kEvaluateSlice, end - at);
    examples.resize(n);
    for (int64_t i = 0; i < n; ++i) examples[i] = at + i;
    if (absl::Status s = Prepare(*test_set_, examples, /*pull_dense=*/false);
        !s.ok()) {
      return s;
    }
    absl::StatusOr<CtrBatchResult> r =
        model_->Evaluate(Input(), &probabilities_);
    if (!r.ok()) return r.status();
    response->set_examples(response->examples() + r->examples);
    response->set_correct(response->correct() +
                          Correct(probabilities_, batch_.labels));
    response->set_loss_sum(response->loss_sum() + r->loss_sum);
    for (int64_t i = 0; i < n; ++i) {
      response->add_probabilities(probabilities_[i]);
      response->add_labels(batch_.labels[i]);
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
