#include "worker/training_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/byte_codec.h"
#include "common/counter_rng.h"
#include "common/model/model_graph.h"
#include "common/model/model_support.h"
#include "common/rpc/grpc_channel.h"
#include "glog/logging.h"
#include "worker/data/batch_view.h"
#include "worker/data/criteo/ctr_dataset.h"
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
                               ChannelSecurity security,
                               std::string inflated_data_dir)
    : cluster_(std::move(cluster)),
      backend_(std::move(backend)),
      ps_options_(ps_options),
      security_(std::move(security)),
      device_name_(backend_->device_name()),
      all_reducer_(all_reducer),
      inflated_(std::move(inflated_data_dir)) {}

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
    if (absl::Status s = params_->Pull(sync_step); !s.ok()) return s;
    if (absl::Status s = graph_->SetParameters(DenseValues()); !s.ok()) {
      return s;
    }
  }
  if (spare_ != nullptr) {
    ParameterSet* next = spare_.get();
    Graph* graph = graph_.get();
    prefetch_ = prefetcher_.Async([next, graph] {
      absl::Status s = next->Pull(std::nullopt);
      if (s.ok()) s = graph->StageParameters(next->values());
      return s;
    });
  }
  return absl::OkStatus();
}

absl::Status TrainingWorker::Configure(const WorkerConfig& given,
                                       ConfigureResponse* response) {
  // Gzipped files are read through this machine's inflated copies.
  WorkerConfig config = given;
  *config.mutable_data() = inflated_.Rewrite(given.data());
  // A prefetch or row push in flight uses the old clients and graph; let
  // it end first.
  CancelPrefetch();
  if (rows_ != nullptr) rows_->WaitForPushes(0).IgnoreError();
  absl::StatusOr<ModelGraph> described =
      BuildModelGraph(config.model_def(), config.seed());
  if (!described.ok()) return described.status();
  absl::StatusOr<TrainingMode> mode = ParseTrainingMode(config.mode());
  if (!mode.ok()) return mode.status();
  absl::flat_hash_set<std::string> replicated;
  for (const auto& [name, optimizer] : config.replicated_tables()) {
    replicated.insert(name);
  }
  if (!replicated.empty() && !mode->replicates_dense()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mode ", mode->ToString(), " has no replicas to keep ",
                     "tables in, but the configuration replicates ",
                     replicated.size(), " table(s)"));
  }
  if (absl::Status s = CheckModeFits(described->variables, *mode, replicated);
      !s.ok()) {
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
  absl::StatusOr<ReplicatedTables> kept =
      ReplicatedTables::Create((*graph)->tables(), config.replicated_tables());
  if (!kept.ok()) return kept.status();
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
    // The coordinator plans by the counts worker 0 answers when probed
    // with an empty shard: those are verified, each file read through. A
    // worker given its shard reads only the files' headers here and loads
    // (so checks) its own examples below, where each worker read both
    // files through before.
    const bool probe = config.train_begin() == config.train_end();
    auto count = probe ? CountExamples : DeclaredExamples;
    train_size = count(config.data(), true, &counts_);
    if (!train_size.ok()) return train_size.status();
    if (config.train_begin() < 0 || config.train_begin() > config.train_end() ||
        config.train_end() > *train_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset shard [", config.train_begin(), ", ", config.train_end(),
          ") is not inside the ", *train_size, " training examples"));
    }
    test_size = count(config.data(), false, &counts_);
    if (!test_size.ok()) return test_size.status();
  }

  std::unique_ptr<MirroredParameters> mirrored;
  if (mode->replicates_dense()) {
    if (all_reducer_ == nullptr ||
        all_reducer_->num_ranks() != config.num_workers() ||
        all_reducer_->rank() != config.worker_index()) {
      return absl::FailedPreconditionError(absl::StrCat(
          mode->ToString(), " mode: the job has ", config.num_workers(),
          " workers and names this one ", config.worker_index(),
          ", but this worker's all-reduce group was started as rank ",
          all_reducer_ ? all_reducer_->rank() : -1, " of ",
          all_reducer_ ? all_reducer_->num_ranks() : 0));
    }
    // Every replica builds the same initial values from the same seed;
    // the tables it keeps whole follow the dense variables.
    std::vector<VariableDef> variables = (*graph)->dense_variables();
    variables.insert(variables.end(), kept->variables().begin(),
                     kept->variables().end());
    absl::StatusOr<std::unique_ptr<MirroredParameters>> replica =
        MirroredParameters::Create(variables, config.optimizer(),
                                   backend_.get());
    if (!replica.ok()) return replica.status();
    mirrored = *std::move(replica);
    mirrored->set_collective({all_reducer_, backend_.get(),
                              /*device_sum=*/(*graph)->tables().empty()});
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
  std::unique_ptr<ParameterSet> params, spare;
  if (mirrored == nullptr) {
    // The dense variables on the parameter servers.
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
  }
  RowExchange::Options row_options;
  row_options.graph = graph->get();
  row_options.kept = *std::move(kept);
  row_options.replica = mirrored.get();
  row_options.servers = mode->uses_parameter_servers();
  row_options.placements = &config.variables();
  row_options.clients = raw;
  row_options.pushes_in_flight = mode->ssp_rows ? mode->staleness : 0;
  row_options.host_memory = backend_.get();
  absl::StatusOr<std::unique_ptr<RowExchange>> rows =
      RowExchange::Create(std::move(row_options));
  if (!rows.ok()) return rows.status();
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

  if (mirrored != nullptr && config.collective_epoch() != 0) {
    // Before anything changes: a failure leaves the worker
    // as it was.
    if (absl::Status s = all_reducer_->Restart(config.collective_epoch());
        !s.ok()) {
      return s;
    }
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
  rows_ = *std::move(rows);
  replica_ = mirrored.get();
  if (mirrored != nullptr) params_ = std::move(mirrored);
  shards_.clear();
  test_set_.reset();
  stream_ = std::move(stream);
  if (own != nullptr) {
    shards_.emplace(std::make_pair(config.train_begin(), config.train_end()),
                    std::move(own));
  }
  const size_t tables = graph_->tables().size();

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
      if (!params_->collective()) return absl::OkStatus();
      return StepWithoutExamples(request, response);
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
  if (ids->empty()) {
    if (!params_->collective()) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", request.step(), " names no examples"));
    }
    // This replica has no data left in the epoch but takes part in the
    // all-reduce with a zero gradient.
    return StepWithoutExamples(request, response);
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
  // hybrid:ssp:S: at most S of this worker's row pushes still under way
  // when its rows are pulled (an earlier push's error surfaces here).
  if (absl::Status s =
          rows_->WaitForPushes(mode_.ssp_rows ? mode_.staleness : 0);
      !s.ok()) {
    return s;
  }
  // Sync: the values after every global step before this one.
  const std::optional<int64_t> sync_step = SyncStepOf(request);
  std::future<absl::Status> rows;
  if (!rows_->empty()) rows = rows_->StartPull(batch_, sync_step);
  absl::Status dense = PrepareParameters(sync_step);
  absl::Status pulled = rows.valid() ? rows.get() : absl::OkStatus();
  if (!dense.ok()) return dense;
  if (!pulled.ok()) return pulled;
  response->set_pull_us(MicrosSince(t0));

  auto t1 = std::chrono::steady_clock::now();
  const uint64_t seed = DeriveSeed(config_.seed(), request.step());
  // Mirrored on GPUs with NCCL: the gradients stay where the backward pass
  // left them, scaled by this replica's weight, for the all-reduce.
  float* on_device = params_->device_gradients();
  absl::StatusOr<GraphResult> result =
      on_device != nullptr
          ? graph_->TrainStepOnDevice(rows_->View(batch_), seed,
                                      static_cast<float>(batch), on_device)
          : graph_->TrainStep(rows_->View(batch_), seed, DenseGradients(),
                              rows_->gradients());
  // A device fault is reported here, before a bad gradient can be pushed.
  if (!result.ok()) return result.status();
  response->set_compute_us(MicrosSince(t1));

  response->set_loss(static_cast<float>(result->loss_sum / batch));
  response->set_examples(batch);
  response->set_correct(result->correct);

  auto t2 = std::chrono::steady_clock::now();
  const float scale = request.sync_scale();
  const SyncPush sync = SyncPushOf(request);
  const SyncPush* tag = sync.required > 0 ? &sync : nullptr;
  // The rows go to the servers (or into the replica's gradients) while
  // the dense gradients are pushed, or all-reduced among the replicas.
  std::future<absl::Status> row_push = rows_->StartPush(scale, tag);
  absl::Status pushed = params_->Push({batch, scale, tag}, response);
  absl::Status rows_pushed =
      row_push.valid() ? row_push.get() : absl::OkStatus();
  if (!pushed.ok()) return pushed;
  if (!rows_pushed.ok()) return rows_pushed;
  response->set_push_us(MicrosSince(t2));
  return absl::OkStatus();
}

std::optional<int64_t> TrainingWorker::SyncStepOf(
    const StepRequest& request) const {
  if (!mode_.aggregates_steps() || request.sync_required() <= 0) {
    return std::nullopt;
  }
  return request.sync_step();
}

SyncPush TrainingWorker::SyncPushOf(const StepRequest& request) const {
  SyncPush sync;
  if (!SyncStepOf(request).has_value()) return sync;  // required 0: untagged
  sync.step = request.sync_step();
  sync.required = request.sync_required();
  sync.part = request.sync_part();
  return sync;
}

std::vector<absl::Span<const float>> TrainingWorker::DenseValues() const {
  std::vector<absl::Span<const float>> values = params_->values();
  values.resize(graph_->dense_variables().size());
  return values;
}

std::vector<absl::Span<float>> TrainingWorker::DenseGradients() {
  std::vector<absl::Span<float>> gradients = params_->gradients();
  gradients.resize(graph_->dense_variables().size());
  return gradients;
}

absl::Status TrainingWorker::StepWithoutExamples(const StepRequest& request,
                                                 StepResponse* response) {
  const SyncPush sync = SyncPushOf(request);
  const SyncPush* tag = sync.required > 0 ? &sync : nullptr;
  // Hybrid:sync: the servers wait for every part of the step, this
  // replica's empty one too.
  std::future<absl::Status> row_push = tag != nullptr
                                           ? rows_->StartEmptyPush(sync)
                                           : std::future<absl::Status>();
  absl::Status reduced =
      params_->Push({/*examples=*/0, request.sync_scale(), tag}, response);
  absl::Status rows_pushed =
      row_push.valid() ? row_push.get() : absl::OkStatus();
  if (!reduced.ok()) return reduced;
  return rows_pushed;
}

absl::Status TrainingWorker::Evaluate(const EvaluateRequest& request,
                                      EvaluateResponse* response) {
  if (!configured()) {
    return absl::FailedPreconditionError("worker is not configured yet");
  }
  // This worker's rows in flight land first (hybrid:ssp:S).
  if (absl::Status s = rows_->WaitForPushes(0); !s.ok()) return s;
  const int64_t begin = request.begin(), end = request.end();
  int64_t test_size = 0;
  if (stream_ != nullptr) {
    test_size = stream_->test_size();
  } else {
    absl::StatusOr<int64_t> n =
        DeclaredExamples(config_.data(), false, &counts_);
    if (!n.ok()) return n.status();
    test_size = *n;
  }
  if (begin < 0 || begin > end || end > test_size) {
    return absl::OutOfRangeError(absl::StrCat("evaluation range [", begin, ", ",
                                              end, ") is not inside the ",
                                              test_size, " test examples"));
  }
  if (stream_ == nullptr && begin < end &&
      (test_set_ == nullptr || begin < test_begin_ ||
       end > test_begin_ + test_set_->size())) {
    // Only the slice asked for (each epoch asks the same): each worker
    // evaluates its part of the test set, and every worker loading all of
    // it cost as much again as the evaluation. Loading verifies the
    // declared count up to the slice's end.
    absl::StatusOr<std::unique_ptr<ExampleSet>> test =
        LoadExamples(config_.data(), config_.model_def(), /*train=*/false,
                     begin, end - begin);
    if (!test.ok()) return test.status();
    test_set_ = *std::move(test);
    test_begin_ = begin;
  }
  // Evaluate the freshest parameters, not a prefetched set.
  CancelPrefetch();
  if (absl::Status s = params_->Pull(std::nullopt); !s.ok()) return s;
  if (absl::Status s = graph_->SetParameters(DenseValues()); !s.ok()) {
    return s;
  }
  // One probability per example: the exact AUC needs them all.
  const bool probabilities =
      config_.model_def().label().kind() == LabelDef::BINARY &&
      graph_->output_size() == 1;
  std::vector<int64_t> indices;
  for (int64_t at = begin; at < end; at += kEvaluateSlice) {
    const int64_t n = std::min(kEvaluateSlice, end - at);
    indices.resize(n);
    for (int64_t i = 0; i < n; ++i) indices[i] = at + i - test_begin_;
    if (absl::Status s = stream_ != nullptr
                             ? stream_->TakeTest(at, at + n, &batch_)
                             : test_set_->Gather(indices, &batch_);
        !s.ok()) {
      return s;
    }
    // A growing table makes the rows of ids seen only in the test set,
    // with their deterministic initial values.
    if (!rows_->empty()) {
      if (absl::Status s = rows_->Pull(batch_); !s.ok()) return s;
    }
    absl::StatusOr<GraphResult> r = graph_->Evaluate(
        rows_->View(batch_), probabilities ? &predictions_ : nullptr);
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
