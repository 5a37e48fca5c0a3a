#include "worker/training_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/byte_codec.h"
#include "common/counter_rng.h"
#include "common/grpc_channel.h"
#include "glog/logging.h"
#include "worker/idx_reader.h"

namespace tessera {
namespace {

int64_t MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now() - start)
      .count();
}

// Examples in an IDX file, optionally capped by the job's subset size.
absl::StatusOr<int64_t> ExampleCount(const std::string& path, int64_t cap) {
  absl::StatusOr<std::vector<int64_t>> dims = ReadIdxDims(path);
  if (!dims.ok()) return dims.status();
  if (dims->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no dimensions"));
  }
  return cap > 0 ? std::min(cap, (*dims)[0]) : (*dims)[0];
}

// The training examples [begin, end) of the job's data.
absl::StatusOr<MnistDataset> LoadTrainShard(const WorkerConfig& config,
                                            int64_t begin, int64_t end) {
  absl::StatusOr<MnistDataset> data =
      LoadMnist(config.data().train_images(), config.data().train_labels(),
                begin, end - begin);
  if (data.ok()) {
    LOG(INFO) << "loaded training examples [" << begin << ", " << end << ")";
  }
  return data;
}

}  // namespace

TrainingWorker::TrainingWorker(ClusterSpec cluster,
                               std::unique_ptr<Backend> backend,
                               PsClientOptions ps_options,
                               AllReducer* all_reducer)
    : cluster_(std::move(cluster)),
      backend_(std::move(backend)),
      ps_options_(ps_options),
      device_name_(backend_->device_name()),
      all_reducer_(all_reducer) {}

absl::Status TrainingWorker::DrainPrefetch() {
  if (!prefetch_.valid()) return absl::OkStatus();
  return prefetch_.get();
}

absl::Status TrainingWorker::PrepareParameters() {
  if (prefetch_.valid() && DrainPrefetch().ok()) {
    std::swap(params_, spare_);
  } else if (absl::Status s = params_->PullAll(); !s.ok()) {
    return s;
  }
  if (spare_ != nullptr) {
    ShardedParameters* next = spare_.get();
    prefetch_ =
        std::async(std::launch::async, [next] { return next->PullAll(); });
  }
  return absl::OkStatus();
}

absl::Status TrainingWorker::Configure(const WorkerConfig& config,
                                       ConfigureResponse* response) {
  // A prefetch in flight uses the old clients; let it end first.
  DrainPrefetch().IgnoreError();
  if (config.model().kind() == "ctr") return ConfigureCtr(config, response);
  absl::StatusOr<int64_t> train_size = ExampleCount(
      config.data().train_images(), config.data().train_examples());
  if (!train_size.ok()) return train_size.status();
  if (config.train_begin() < 0 || config.train_begin() > config.train_end() ||
      config.train_end() > *train_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset shard [", config.train_begin(), ", ", config.train_end(),
        ") is not inside the ", *train_size, " training examples"));
  }
  absl::StatusOr<std::unique_ptr<MlpModel>> model =
      MlpModel::Create(config.model(), backend_.get());
  if (!model.ok()) return model.status();
  absl::StatusOr<TrainingMode> mode = ParseTrainingMode(config.mode());
  if (!mode.ok()) return mode.status();

  std::unique_ptr<MirroredParameters> mirrored;
  if (mode->kind == TrainingMode::Kind::kMirrored) {
    if (all_reducer_ == nullptr ||
        all_reducer_->num_ranks() != config.num_workers() ||
        all_reducer_->rank() != config.worker_index()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "mirrored mode: the job has ", config.num_workers(),
          " workers and names this one ", config.worker_index(),
          ", but this worker's all-reduce group was started as rank ",
          all_reducer_ ? all_reducer_->rank() : -1, " of ",
          all_reducer_ ? all_reducer_->num_ranks() : 0));
    }
    // Every replica builds the same initial values from the same seed.
    absl::StatusOr<std::vector<VariableDef>> variables =
        ModelVariables(config.model(), config.seed());
    if (!variables.ok()) return variables.status();
    absl::StatusOr<std::unique_ptr<MirroredParameters>> replica =
        MirroredParameters::Create(*variables, config.optimizer());
    if (!replica.ok()) return replica.status();
    mirrored = *std::move(replica);
  }

  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<PsClient*> raw;
  const std::vector<std::string>& ps = cluster_.tasks("ps");
  for (size_t k = 0; k < ps.size(); ++k) {
    clients.push_back(std::make_unique<PsClient>(
        ps[k], static_cast<int>(k), MakeChannel(ps[k]), ps_options_));
    raw.push_back(clients.back().get());
  }
  std::unique_ptr<ShardedParameters> params;
  if (mirrored == nullptr) {
    absl::StatusOr<std::unique_ptr<ShardedParameters>> sharded =
        ShardedParameters::Create((*model)->variables(), config.variables(),
                                  raw);
    if (!sharded.ok()) return sharded.status();
    params = *std::move(sharded);
  }
  std::unique_ptr<ShardedParameters> spare;
  if (config.prefetch_parameters() && mirrored == nullptr) {
    absl::StatusOr<std::unique_ptr<ShardedParameters>> second =
        ShardedParameters::Create((*model)->variables(), config.variables(),
                                  raw);
    if (!second.ok()) return second.status();
    spare = *std::move(second);
  }
  absl::StatusOr<MnistDataset> own =
      LoadTrainShard(config, config.train_begin(), config.train_end());
  if (!own.ok()) return own.status();
  const int64_t own_size = own->size;

  // Only now, with everything valid, replace the old state. The cached
  // data sets may come from other files: they go too.
  ctr_.reset();
  config_ = config;
  mode_ = *mode;
  train_size_ = *train_size;
  clients_ = std::move(clients);
  model_ = *std::move(model);
  params_ = std::move(params);
  spare_ = std::move(spare);
  mirrored_ = std::move(mirrored);
  shards_.clear();
  test_set_.reset();
  shards_.emplace(std::make_pair(config.train_begin(), config.train_end()),
                  *std::move(own));

  configured_.store(true);
  response->set_train_examples(own_size);
  response->set_device(device_name_);
  LOG(INFO) << "configured as worker " << config.worker_index() << " on "
            << device_name_ << ", dataset shard [" << config.train_begin()
            << ", " << config.train_end() << ")";
  return absl::OkStatus();
}

absl::Status TrainingWorker::ConfigureCtr(const WorkerConfig& config,
                                          ConfigureResponse* response) {
  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<PsClient*> raw;
  const std::vector<std::string>& ps = cluster_.tasks("ps");
  for (size_t k = 0; k < ps.size(); ++k) {
    clients.push_back(std::make_unique<PsClient>(
        ps[k], static_cast<int>(k), MakeChannel(ps[k]), ps_options_));
    raw.push_back(clients.back().get());
  }
  // The old clients stay alive until the new worker replaces its user.
  absl::StatusOr<std::unique_ptr<CtrWorker>> ctr =
      CtrWorker::Create(config, raw, backend_.get());
  if (!ctr.ok()) return ctr.status();
  ctr_ = *std::move(ctr);
  params_.reset();
  spare_.reset();
  mirrored_.reset();
  model_.reset();
  shards_.clear();
  test_set_.reset();
  clients_ = std::move(clients);
  config_ = config;
  configured_.store(true);
  response->set_train_examples(ctr_->own_shard_size());
  response->set_device(device_name_);
  LOG(INFO) << "configured as click-through worker " << config.worker_index()
            << " on " << device_name_ << ", dataset shard ["
            << config.train_begin() << ", " << config.train_end() << ")";
  return absl::OkStatus();
}

absl::StatusOr<const MnistDataset*> TrainingWorker::TrainShard(int64_t begin,
                                                               int64_t end) {
  auto key = std::make_pair(begin, end);
  auto it = shards_.find(key);
  if (it != shards_.end()) return &it->second;
  absl::StatusOr<MnistDataset> data = LoadTrainShard(config_, begin, end);
  if (!data.ok()) return data.status();
  return &shards_.emplace(key, *std::move(data)).first->second;
}

absl::Status TrainingWorker::RunStep(const StepRequest& request,
                                     StepResponse* response) {
  if (!configured()) {
    return absl::FailedPreconditionError("worker is not configured yet");
  }
  if (ctr_ != nullptr) return ctr_->RunStep(request, response);
  const int64_t begin = request.shard_begin(), end = request.shard_end();
  if (begin < 0 || begin > end || end > train_size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", request.step(), ": dataset shard [", begin, ", ", end,
        ") is not inside the ", train_size_, " training examples"));
  }
  absl::StatusOr<std::vector<int64_t>> ids =
      DecodeRaw<int64_t>(request.example_ids(), "example_ids");
  if (!ids.ok()) return ids.status();
  if (ids->empty() && mirrored_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", request.step(), " names no examples"));
  }
  if (mirrored_ != nullptr && ids->empty()) {
    // This replica has no data left in the epoch but takes part in the
    // all-reduce with a zero gradient.
    mirrored_->ZeroGradients();
    return MirroredUpdate(0, response);
  }
  for (int64_t id : *ids) {
    if (id < begin || id >= end) {
      return absl::OutOfRangeError(absl::StrCat(
          "step ", request.step(), ": example id ", id,
          " is outside its dataset shard [", begin, ", ", end, ")"));
    }
  }
  absl::StatusOr<const MnistDataset*> data = TrainShard(begin, end);
  if (!data.ok()) return data.status();

  const int64_t batch = static_cast<int64_t>(ids->size());
  const int dim = (*data)->feature_dim();
  if (dim != model_->input_dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("wrong shape: examples have ", dim,
                     " features, the model expects ", model_->input_dim()));
  }
  batch_x_.resize(batch * dim);
  batch_y_.resize(batch);
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t local = (*ids)[i] - begin;
    std::copy_n((*data)->example(local), dim, batch_x_.data() + i * dim);
    batch_y_[i] = (*data)->labels[local];
  }

  auto t0 = std::chrono::steady_clock::now();
  if (mirrored_ == nullptr) {
    if (absl::Status s = PrepareParameters(); !s.ok()) return s;
  }
  response->set_pull_us(MicrosSince(t0));

  auto t1 = std::chrono::steady_clock::now();
  if (absl::Status s = model_->SetParameters(mirrored_ ? mirrored_->values()
                                                       : params_->values());
      !s.ok()) {
    return s;
  }
  std::vector<absl::Span<float>> grads =
      mirrored_ ? mirrored_->gradients() : params_->gradients();
  absl::StatusOr<BatchResult> result = model_->TrainStep(
      batch_x_, batch_y_, DeriveSeed(config_.seed(), request.step()), grads);
  if (!result.ok()) return result.status();
  // A device fault is reported here, before a bad gradient can be pushed.
  if (absl::Status s = backend_->Synchronize(); !s.ok()) return s;
  response->set_compute_us(MicrosSince(t1));

  response->set_loss(static_cast<float>(result->loss_sum / batch));
  response->set_examples(batch);
  response->set_correct(result->correct);

  if (mirrored_ != nullptr) {
    mirrored_->SetWeight(static_cast<double>(batch));
    return MirroredUpdate(batch, response);
  }
  auto t2 = std::chrono::steady_clock::now();
  SyncPush sync;
  sync.step = request.sync_step();
  sync.required = request.sync_required();
  ShardedParameters::PushOutcome outcome;
  if (absl::Status s =
          params_->PushAll(sync.required > 0 ? &sync : nullptr, &outcome);
      !s.ok()) {
    return s;
  }
  response->set_push_us(MicrosSince(t2));
  for (int64_t st : outcome.staleness) response->add_staleness(st);
  response->set_late_shards(outcome.late_shards);
  return absl::OkStatus();
}

absl::Status TrainingWorker::MirroredUpdate(int64_t batch,
                                            StepResponse* response) {
  auto t = std::chrono::steady_clock::now();
  if (absl::Status s = all_reducer_->AllReduce(mirrored_->reduce_buffer());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = mirrored_->ApplyReduced(); !s.ok()) return s;
  response->set_push_us(MicrosSince(t));
  response->set_replica_checksum(mirrored_->Checksum());
  if (batch == 0) response->set_examples(0);
  return absl::OkStatus();
}

absl::Status TrainingWorker::Evaluate(const EvaluateRequest& request,
                                      EvaluateResponse* response) {
  if (!configured()) {
    return absl::FailedPreconditionError("worker is not configured yet");
  }
  if (ctr_ != nullptr) return ctr_->Evaluate(request, response);
  if (test_set_ == nullptr) {
    absl::StatusOr<int64_t> n = ExampleCount(config_.data().test_images(),
                                             config_.data().test_examples());
    if (!n.ok()) return n.status();
    absl::StatusOr<MnistDataset> test = LoadMnist(
        config_.data().test_images(), config_.data().test_labels(), 0, *n);
    if (!test.ok()) return test.status();
    // The model reads input_dim() features per example: test images of
    // another size would be read past their end.
    const int64_t features = int64_t{test->rows} * test->cols;
    if (features != model_->input_dim()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wrong shape: test examples in ", config_.data().test_images(),
          " have ", features, " features (", test->rows, "x", test->cols,
          "), the model expects ", model_->input_dim()));
    }
    test_set_ = std::make_unique<MnistDataset>(*std::move(test));
  }
  const int64_t begin = request.begin(), end = request.end();
  if (begin < 0 || begin > end || end > test_set_->size) {
    return absl::OutOfRangeError(absl::StrCat(
        "evaluation range [", begin, ", ", end, ") is not inside the ",
        test_set_->size, " test examples"));
  }
  if (mirrored_ != nullptr) {
    if (absl::Status s = model_->SetParameters(mirrored_->values()); !s.ok()) {
      return s;
    }
  } else {
    // Evaluate the freshest parameters, not a prefetched set.
    DrainPrefetch().IgnoreError();
    if (absl::Status s = params_->PullAll(); !s.ok()) return s;
    if (absl::Status s = model_->SetParameters(params_->values()); !s.ok()) {
      return s;
    }
  }
  // Evaluate in slices so activation buffers stay small.
  constexpr int64_t kSlice = 1000;
  for (int64_t at = begin; at < end; at += kSlice) {
    const int64_t n = std::min(kSlice, end - at);
    absl::StatusOr<BatchResult> r =
        model_->Evaluate(absl::MakeConstSpan(test_set_->example(at),
                                             n * test_set_->feature_dim()),
                         absl::MakeConstSpan(test_set_->labels.data() + at, n));
    if (!r.ok()) return r.status();
    response->set_examples(response->examples() + r->examples);
    response->set_correct(response->correct() + r->correct);
    response->set_loss_sum(response->loss_sum() + r->loss_sum);
  }
  return absl::OkStatus();
}

}  // namespace tessera
