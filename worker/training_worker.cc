#include "worker/training_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/byte_codec.h"
#include "common/counter_rng.h"
#include "common/model/model_graph.h"
#include "common/model/model_support.h"
#include "common/rpc/grpc_channel.h"
#include "glog/logging.h"
#include "worker/data/batch_view.h"
#include "worker/data/stream/file_assignment.h"

namespace tessera {
namespace {

int64_t MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now() - start)
      .count();
}

// Test examples evaluated per forward pass, so activations stay small.
constexpr int64_t kEvaluateSlice = 1024;

}  // namespace

TrainingWorker::TrainingWorker(ClusterSpec cluster,
                               std::unique_ptr<Backend> backend,
                               PsClientOptions ps_options,
                               AllReducer* all_reducer,
                               ChannelSecurity security)
    : cluster_(std::move(cluster)),
      backend_(std::move(backend)),
      ps_options_(ps_options),
      security_(std::move(security)),
      device_name_(backend_->device_name()),
      all_reducer_(all_reducer) {}

absl::Status TrainingWorker::DrainPrefetch() {
  if (!prefetch_.valid()) return absl::OkStatus();
  return prefetch_.get();
}

void TrainingWorker::CancelPrefetch() {
  DrainPrefetch().IgnoreError();
  if (graph_ != nullptr && spare_ != nullptr) {
    graph_->DiscardStagedParameters();
  }
}

absl::Status TrainingWorker::PrepareParameters(
    std::optional<int64_t> sync_step) {
  if (prefetch_.valid() && DrainPrefetch().ok()) {
    // Pulled, and copied to the device, while the last step computed.
    std::swap(params_, spare_);
    graph_->UseStagedParameters();
  } else {
    if (spare_ != nullptr) graph_->DiscardStagedParameters();
    if (absl::Status s = params_->PullAll(sync_step); !s.ok()) return s;
    if (absl::Status s = graph_->SetParameters(params_->values()); !s.ok()) {
      return s;
    }
  }
  if (spare_ != nullptr) {
    ShardedParameters* next = spare_.get();
    Graph* graph = graph_.get();
    prefetch_ = prefetcher_.Async([next, graph] {
      absl::Status s = next->PullAll();
      if (s.ok()) s = graph->StageParameters(next->values());
      return s;
    });
  }
  return absl::OkStatus();
}

absl::Status TrainingWorker::Configure(const WorkerConfig& config,
                                       ConfigureResponse* response) {
  // A prefetch in flight uses the old clients and graph; let it end first.
  CancelPrefetch();
  absl::StatusOr<ModelGraph> described =
      BuildModelGraph(config.model_def(), config.seed());
  if (!described.ok()) return described.status();
  absl::StatusOr<TrainingMode> mode = ParseTrainingMode(config.mode());
  if (!mode.ok()) return mode.status();
  if (absl::Status s = CheckModeFits(described->variables, *mode); !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckDataFits(config.model_def(), config.data().format());
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, backend_.get());
  if (!graph.ok()) return graph.status();
  if (IsStreamedFormat(config.data().format()) &&
      config.train_shards_size() == 0) {
    // The coordinator's first call: this worker reads the data, so it
    // globs, counts and assigns the files (AssignStreamedData) and answers
    // with the assignment; it is configured by the next call.
    absl::StatusOr<StreamedDataSet> assigned =
        AssignStreamedData(config.data(), std::max(1, config.num_workers()));
    if (!assigned.ok()) return assigned.status();
    for (const StreamShard& shard : assigned->train_shards) {
      *response->add_train_shards() = shard;
    }
    for (const FileSlice& file : assigned->test_files) {
      *response->add_test_files() = file;
    }
    response->set_train_total(assigned->train_records);
    response->set_test_examples(assigned->test_records);
    response->set_device(device_name_);
    return absl::OkStatus();
  }
  // Streamed formats: the coordinator sends the shards; nothing is loaded
  // here.
  std::unique_ptr<StreamExamples> stream;
  absl::StatusOr<int64_t> train_size = int64_t{0}, test_size = int64_t{0};
  if (IsStreamedFormat(config.data().format())) {
    absl::StatusOr<std::unique_ptr<StreamExamples>> created =
        StreamExamples::Create(
            config.data(), config.model_def(), config.seed(),
            {config.train_shards().begin(), config.train_shards().end()},
            {config.test_files().begin(), config.test_files().end()});
    if (!created.ok()) return created.status();
    stream = *std::move(created);
    train_size = stream->train_size();
    test_size = stream->test_size();
  } else {
    train_size = CountExamples(config.data(), true);
    if (!train_size.ok()) return train_size.status();
    if (config.train_begin() < 0 || config.train_begin() > config.train_end() ||
        config.train_end() > *train_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset shard [", config.train_begin(), ", ", config.train_end(),
          ") is not inside the ", *train_size, " training examples"));
    }
    test_size = CountExamples(config.data(), false);
    if (!test_size.ok()) return test_size.status();
  }

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
    absl::StatusOr<std::unique_ptr<MirroredParameters>> replica =
        MirroredParameters::Create((*graph)->dense_variables(),
                                   config.optimizer(), backend_.get());
    if (!replica.ok()) return replica.status();
    mirrored = *std::move(replica);
  }

  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<PsClient*> raw;
  const std::vector<std::string>& ps = cluster_.tasks("ps");
  for (size_t k = 0; k < ps.size(); ++k) {
    clients.push_back(std::make_unique<PsClient>(ps[k], static_cast<int>(k),
                                                 MakeChannel(ps[k], security_),
                                                 ps_options_));
    raw.push_back(clients.back().get());
  }
  std::unique_ptr<ShardedParameters> params, spare;
  std::unique_ptr<SparseParameters> sparse;
  if (mirrored == nullptr) {
    const std::vector<VariableDef>& dense = (*graph)->dense_variables();
    // Where the device is the host, the pulls land in the graph's own
    // buffers and the pushes go out from them. Not with prefetching: the
    // next step's pull must not write what this step computes with.
    const ShardedParameters::Borrowed in_graph{
        (*graph)->HostVisibleValues(), (*graph)->HostVisibleGradients()};
    const bool borrow =
        !config.prefetch_parameters() && !in_graph.values.empty();
    absl::StatusOr<std::unique_ptr<ShardedParameters>> sharded =
        ShardedParameters::Create(dense, config.variables(), raw,
                                  backend_.get(), borrow ? &in_graph : nullptr);
    if (!sharded.ok()) return sharded.status();
    params = *std::move(sharded);
    if (config.prefetch_parameters()) {
      absl::StatusOr<std::unique_ptr<ShardedParameters>> second =
          ShardedParameters::Create(dense, config.variables(), raw,
                                    backend_.get());
      if (!second.ok()) return second.status();
      spare = *std::move(second);
      // The prefetched set goes to the device while a step computes.
      if (absl::Status s = (*graph)->PrepareStaging(); !s.ok()) return s;
    }
    if (!(*graph)->tables().empty()) {
      absl::StatusOr<std::unique_ptr<SparseParameters>> tables =
          SparseParameters::Create((*graph)->tables(), config.variables(), raw);
      if (!tables.ok()) return tables.status();
      sparse = *std::move(tables);
    }
  }
  std::unique_ptr<ExampleSet> own;
  int64_t own_size = 0;
  if (stream != nullptr) {
    own_size = stream->shard_size(config.worker_index());
  } else {
    absl::StatusOr<std::unique_ptr<ExampleSet>> loaded = LoadExamples(
        config.data(), config.model_def(), /*train=*/true, config.train_begin(),
        config.train_end() - config.train_begin());
    if (!loaded.ok()) return loaded.status();
    LOG(INFO) << "loaded training examples [" << config.train_begin() << ", "
              << config.train_end() << ")";
    own = *std::move(loaded);
    own_size = own->size();
  }

  // Only now, with everything valid, replace the old state. The cached
  // data sets may come from other files: they go too.
  config_ = config;
  mode_ = *mode;
  train_size_ = *train_size;
  clients_ = std::move(clients);
  graph_ = *std::move(graph);
  params_ = std::move(params);
  spare_ = std::move(spare);
  sparse_ = std::move(sparse);
  mirrored_ = std::move(mirrored);
  device_reduce_ = DeviceArray<float>();
  shards_.clear();
  test_set_.reset();
  stream_ = std::move(stream);
  if (own != nullptr) {
    shards_.emplace(std::make_pair(config.train_begin(), config.train_end()),
                    std::move(own));
  }
  const size_t tables = graph_->tables().size();
  unique_.assign(tables, {});
  positions_.assign(tables, {});
  rows_.clear();
  for (size_t t = 0; t < tables; ++t) rows_.emplace_back(backend_.get());
  push_ids_.assign(tables, {});
  push_grads_.assign(tables, {});

  configured_.store(true);
  response->set_train_examples(own_size);
  response->set_train_total(*train_size);
  response->set_test_examples(*test_size);
  response->set_device(device_name_);
  LOG(INFO) << "configured as worker " << config.worker_index() << " on "
            << device_name_ << ", " << graph_->dense_variables().size()
            << " dense variables and " << tables << " tables, "
            << (stream_ != nullptr
                    ? absl::StrCat("streaming ", config.train_shards_size(),
                                   " shards of ", *train_size, " records")
                    : absl::StrCat("dataset shard [", config.train_begin(),
                                   ", ", config.train_end(), ")"));
  return absl::OkStatus();
}

absl::StatusOr<const ExampleSet*> TrainingWorker::TrainShard(int64_t begin,
                                                             int64_t end) {
  auto key = std::make_pair(begin, end);
  auto it = shards_.find(key);
  if (it != shards_.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<ExampleSet>> data = LoadExamples(
      config_.data(), config_.model_def(), /*train=*/true, begin, end - begin);
  if (!data.ok()) return data.status();
  LOG(INFO) << "loaded training examples [" << begin << ", " << end << ")";
  return shards_.emplace(key, *std::move(data)).first->second.get();
}

absl::Status TrainingWorker::PullRows(std::optional<int64_t> sync_step) {
  for (size_t t = 0; t < unique_.size(); ++t) {
    CollectTableIds(*graph_, batch_, static_cast<int>(t), &table_ids_);
    sparse_->Localize(static_cast<int>(t), table_ids_, &unique_[t],
                      &positions_[t]);
  }
  std::vector<absl::Span<float>> into(rows_.size());
  for (size_t t = 0; t < rows_.size(); ++t) {
    rows_[t].Resize(static_cast<int64_t>(unique_[t].size()) *
                    sparse_->dim(static_cast<int>(t)));
    into[t] = rows_[t].span();
  }
  return sparse_->Pull(unique_, into, sync_step);
}

GraphBatch TrainingWorker::View() const {
  std::vector<absl::Span<const float>> rows;
  for (const HostBuffer<float>& buffer : rows_) rows.push_back(buffer.span());
  return ViewOf(batch_, rows, positions_);
}

absl::Status TrainingWorker::RunStep(const StepRequest& request,
                                     StepResponse* response) {
  if (!configured()) {
    return absl::FailedPreconditionError("worker is not configured yet");
  }
  if (request.has_stream()) {
    if (absl::Status s = StreamBatch(request, response); !s.ok()) return s;
    if (batch_.size == 0) {
      // Every position of the step held a bad record, all skipped.
      response->set_examples(0);
      if (mirrored_ == nullptr) return absl::OkStatus();
      return MirroredUpdate(0, ReduceOnDevice(), response);
    }
    return TrainBatch(request, response);
  }
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
    return MirroredUpdate(0, ReduceOnDevice(), response);
  }
  for (int64_t& id : *ids) {
    if (id < begin || id >= end) {
      return absl::OutOfRangeError(absl::StrCat(
          "step ", request.step(), ": example id ", id,
          " is outside its dataset shard [", begin, ", ", end, ")"));
    }
    id -= begin;  // index into the loaded shard
  }
  absl::StatusOr<const ExampleSet*> data = TrainShard(begin, end);
  if (!data.ok()) return data.status();
  if (absl::Status s = (*data)->Gather(*ids, &batch_); !s.ok()) return s;
  return TrainBatch(request, response);
}

absl::Status TrainingWorker::StreamBatch(const StepRequest& request,
                                         StepResponse* response) {
  if (stream_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", request.step(),
                     " names stream positions, but the job's "
                     "data format \"",
                     config_.data().format(), "\" is not streamed"));
  }
  const StreamStep& step = request.stream();
  int64_t bad = 0;
  std::string why_bad;
  if (absl::Status s = stream_->Take(step.shard(), step.pass(), step.first(),
                                     step.count(), &batch_, &bad, &why_bad);
      !s.ok()) {
    return s;
  }
  if (bad > 0) {
    LOG(WARNING) << "step " << request.step() << " skipped " << bad
                 << " bad records (skip_bad_records), the last: " << why_bad;
  }
  response->set_bad_records(bad);
  return absl::OkStatus();
}

absl::Status TrainingWorker::TrainBatch(const StepRequest& request,
                                        StepResponse* response) {
  const int64_t batch = batch_.size;

  auto t0 = std::chrono::steady_clock::now();
  // Sync: the values after every global step before this one.
  const std::optional<int64_t> sync_step =
      request.sync_required() > 0 && mirrored_ == nullptr
          ? std::optional<int64_t>(request.sync_step())
          : std::nullopt;
  std::future<absl::Status> rows;
  if (sparse_ != nullptr) {
    rows = row_calls_.Async([this, sync_step] { return PullRows(sync_step); });
  }
  absl::Status dense =
      mirrored_ == nullptr ? PrepareParameters(sync_step) : absl::OkStatus();
  absl::Status pulled = rows.valid() ? rows.get() : absl::OkStatus();
  if (!dense.ok()) return dense;
  if (!pulled.ok()) return pulled;
  response->set_pull_us(MicrosSince(t0));

  auto t1 = std::chrono::steady_clock::now();
  // (PrepareParameters has put the sharded parameters on the device.)
  if (mirrored_ != nullptr) {
    if (absl::Status s = graph_->SetParameters(mirrored_->values()); !s.ok()) {
      return s;
    }
  }
  const uint64_t seed = DeriveSeed(config_.seed(), request.step());
  // Mirrored on GPUs with NCCL: the gradients stay where the backward pass
  // left them, scaled by this replica's weight, for the all-reduce.
  const bool on_device = ReduceOnDevice();
  absl::StatusOr<GraphResult> result =
      on_device
          ? graph_->TrainStepOnDevice(View(), seed, static_cast<float>(batch),
                                      device_reduce_.data())
          : graph_->TrainStep(
                View(), seed,
                mirrored_ ? mirrored_->gradients() : params_->gradients(),
                &table_grads_);
  // A device fault is reported here, before a bad gradient can be pushed.
  if (!result.ok()) return result.status();
  response->set_compute_us(MicrosSince(t1));

  response->set_loss(static_cast<float>(result->loss_sum / batch));
  response->set_examples(batch);
  response->set_correct(result->correct);

  if (mirrored_ != nullptr) return MirroredUpdate(batch, on_device, response);
  auto t2 = std::chrono::steady_clock::now();
  const float scale = request.sync_scale();
  if (scale != 0 && scale != 1) ScaleGradients(scale);
  // The graph's table gradients index this batch's distinct rows; push
  // them under their row ids.
  for (size_t t = 0; t < table_grads_.size(); ++t) {
    const TableGradient& grad = table_grads_[t];
    push_ids_[t].resize(grad.rows.size());
    for (size_t k = 0; k < grad.rows.size(); ++k) {
      push_ids_[t][k] = unique_[t][grad.rows[k]];
    }
    push_grads_[t].swap(table_grads_[t].values);
  }
  SyncPush sync;
  sync.step = request.sync_step();
  sync.required = request.sync_required();
  sync.part = request.sync_part();
  std::future<absl::Status> row_push;
  if (sparse_ != nullptr) {
    row_push = row_calls_.Async([this, &sync] {
      return sparse_->Push(push_ids_, push_grads_,
                           sync.required > 0 ? &sync : nullptr);
    });
  }
  ShardedParameters::PushOutcome outcome;
  absl::Status pushed =
      params_->PushAll(sync.required > 0 ? &sync : nullptr, &outcome);
  absl::Status rows_pushed =
      row_push.valid() ? row_push.get() : absl::OkStatus();
  for (size_t t = 0; t < table_grads_.size(); ++t) {
    push_grads_[t].swap(table_grads_[t].values);
  }
  if (!pushed.ok()) return pushed;
  if (!rows_pushed.ok()) return rows_pushed;
  response->set_push_us(MicrosSince(t2));
  for (int64_t st : outcome.staleness) response->add_staleness(st);
  response->set_late_shards(outcome.late_shards);
  return absl::OkStatus();
}

void TrainingWorker::ScaleGradients(float scale) {
  for (absl::Span<float> g : params_->gradients()) {
    for (float& x : g) x *= scale;
  }
  for (TableGradient& g : table_grads_) {
    for (float& x : g.values) x *= scale;
  }
}

bool TrainingWorker::ReduceOnDevice() {
  if (mirrored_ == nullptr || !all_reducer_->on_device() ||
      !graph_->tables().empty()) {
    return false;
  }
  const int64_t n = mirrored_->reduce_buffer().size();
  if (device_reduce_.size() != n) {
    device_reduce_ = DeviceArray<float>(backend_.get(), n);
  }
  return device_reduce_.data() != nullptr;
}

absl::Status TrainingWorker::MirroredUpdate(int64_t batch, bool on_device,
                                            StepResponse* response) {
  auto t = std::chrono::steady_clock::now();
  const absl::Span<float> host = mirrored_->reduce_buffer();
  if (on_device) {
    // TrainStepOnDevice wrote the weighted gradients; the weight goes
    // after them (a replica without examples sends zeros).
    float* data = device_reduce_.data();
    const int64_t n = static_cast<int64_t>(host.size());
    if (batch == 0) {
      backend_->Fill(n, 0.0f, data);
    } else {
      backend_->Fill(1, static_cast<float>(batch), data + n - 1);
    }
    if (absl::Status s = backend_->status(); !s.ok()) return s;
    if (absl::Status s = all_reducer_->AllReduceOnDevice(
            absl::MakeSpan(data, n), backend_->native_stream());
        !s.ok()) {
      return s;
    }
    // The sum's one trip to the host, where the optimizer runs (pinned
    // memory on a GPU: no staging).
    backend_->CopyToHost(data, host.data(), n * sizeof(float));
    if (absl::Status s = backend_->Synchronize(); !s.ok()) return s;
  } else {
    if (batch == 0) {
      mirrored_->ZeroGradients();
    } else {
      mirrored_->SetWeight(static_cast<double>(batch));
    }
    if (absl::Status s = all_reducer_->AllReduce(host); !s.ok()) return s;
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
  if (test_set_ == nullptr && stream_ == nullptr) {
    absl::StatusOr<int64_t> n = CountExamples(config_.data(), false);
    if (!n.ok()) return n.status();
    absl::StatusOr<std::unique_ptr<ExampleSet>> test = LoadExamples(
        config_.data(), config_.model_def(), /*train=*/false, 0, *n);
    if (!test.ok()) return test.status();
    test_set_ = *std::move(test);
  }
  const int64_t begin = request.begin(), end = request.end();
  const int64_t test_size =
      stream_ != nullptr ? stream_->test_size() : test_set_->size();
  if (begin < 0 || begin > end || end > test_size) {
    return absl::OutOfRangeError(absl::StrCat("evaluation range [", begin, ", ",
                                              end, ") is not inside the ",
                                              test_size, " test examples"));
  }
  if (mirrored_ != nullptr) {
    if (absl::Status s = graph_->SetParameters(mirrored_->values()); !s.ok()) {
      return s;
    }
  } else {
    // Evaluate the freshest parameters, not a prefetched set.
    CancelPrefetch();
    if (absl::Status s = params_->PullAll(); !s.ok()) return s;
    if (absl::Status s = graph_->SetParameters(params_->values()); !s.ok()) {
      return s;
    }
  }
  // One probability per example: the exact AUC needs them all.
  const bool probabilities =
      config_.model_def().label().kind() == LabelDef::BINARY &&
      graph_->output_size() == 1;
  std::vector<int64_t> indices;
  for (int64_t at = begin; at < end; at += kEvaluateSlice) {
    const int64_t n = std::min(kEvaluateSlice, end - at);
    indices.resize(n);
    for (int64_t i = 0; i < n; ++i) indices[i] = at + i;
    if (absl::Status s = stream_ != nullptr
                             ? stream_->TakeTest(at, at + n, &batch_)
                             : test_set_->Gather(indices, &batch_);
        !s.ok()) {
      return s;
    }
    // A growing table makes the rows of ids seen only in the test set,
    // with their deterministic initial values.
    if (sparse_ != nullptr) {
      if (absl::Status s = PullRows(); !s.ok()) return s;
    }
    absl::StatusOr<GraphResult> r =
        graph_->Evaluate(View(), probabilities ? &predictions_ : nullptr);
    if (!r.ok()) return r.status();
    response->set_examples(response->examples() + r->examples);
    response->set_correct(response->correct() + r->correct);
    response->set_loss_sum(response->loss_sum() + r->loss_sum);
    if (probabilities) {
      for (int64_t i = 0; i < n; ++i) {
        response->add_probabilities(predictions_[i]);
        response->add_labels(batch_.labels[i]);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
