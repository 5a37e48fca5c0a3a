#include "worker/training_worker.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/byte_codec.h"
#include "common/counter_rng.h"
#include "glog/logging.h"
#include "worker/data/batch_view.h"

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
  if (state_ != nullptr && state_->spare != nullptr) {
    state_->graph->DiscardStagedParameters();
  }
}

absl::Status TrainingWorker::PrepareParameters(
    std::optional<int64_t> sync_step) {
  if (prefetch_.valid() && DrainPrefetch().ok()) {
    // Pulled, and copied to the device, while the last step computed.
    std::swap(state_->params, state_->spare);
    state_->graph->UseStagedParameters();
  } else {
    if (state_->spare != nullptr) state_->graph->DiscardStagedParameters();
    if (absl::Status s = state_->params->Pull(sync_step); !s.ok()) return s;
    if (absl::Status s = state_->graph->SetParameters(DenseValues()); !s.ok()) {
      return s;
    }
  }
  if (state_->spare != nullptr) {
    ParameterSet* next = state_->spare.get();
    Graph* graph = state_->graph.get();
    prefetch_ = prefetcher_.Async([next, graph] {
      absl::Status s = next->Pull(std::nullopt);
      if (s.ok()) s = graph->StageParameters(next->values());
      return s;
    });
  }
  return absl::OkStatus();
}

absl::Status TrainingWorker::StartCollectiveOver(const WorkerConfig& config) {
  const uint64_t epoch = config.collective_epoch();
  // A worker of the cluster spec goes back to the spec's ring: a chief
  // that restarted after a ring join or drain knows only the spec's
  // workers, and the ring may still hold a newcomer or lack a member. A
  // group whose members never change restarts as it is.
  if (config.worker_index() < config.num_workers()) {
    absl::Status s = all_reducer_->Reform(cluster_.task().index,
                                          cluster_.tasks("worker"), epoch);
    if (!absl::IsUnimplemented(s)) return s;
  }
  return all_reducer_->Restart(epoch);
}

absl::Status TrainingWorker::Configure(const WorkerConfig& given,
                                       ConfigureResponse* response) {
  // Gzipped files are read through this machine's inflated copies.
  WorkerConfig config = given;
  *config.mutable_data() = inflated_.Rewrite(given.data());
  // A prefetch or row push in flight uses the old clients and graph; let
  // it end first.
  CancelPrefetch();
  if (state_ != nullptr) state_->rows->WaitForPushes(0).IgnoreError();
  const WorkerContext context{&cluster_,  backend_.get(), ps_options_,
                              &security_, all_reducer_,   &counts_};
  absl::StatusOr<std::unique_ptr<ConfiguredState>> built =
      BuildWorkerState(config, context, response);
  if (!built.ok()) return built.status();
  if (*built == nullptr) return absl::OkStatus();  // the data's assignment
  const ConfiguredState& next = **built;
  if (next.replica != nullptr && config.collective_epoch() != 0) {
    // Before anything changes: a failure leaves the worker as it was.
    if (absl::Status s = StartCollectiveOver(config); !s.ok()) return s;
  }
  response->set_train_examples(next.own_size);
  response->set_train_total(next.train_size);
  response->set_test_examples(next.test_size);
  response->set_device(device_name_);
  LOG(INFO) << "configured as worker " << config.worker_index() << " on "
            << device_name_ << ", " << next.graph->dense_variables().size()
            << " dense variables and " << next.graph->tables().size()
            << " tables, "
            << (next.stream != nullptr
                    ? absl::StrCat("streaming ", config.train_shards_size(),
                                   " shards of ", next.train_size, " records")
                    : absl::StrCat("dataset shard [", config.train_begin(),
                                   ", ", config.train_end(), ")"));
  // The one change: the old state, with the data sets it cached (they may
  // come from other files), goes whole. Calls are serialised by the
  // service, so no step sees half of either.
  state_ = *std::move(built);
  configured_.store(true);
  return absl::OkStatus();
}

absl::StatusOr<const ExampleSet*> TrainingWorker::TrainShard(int64_t begin,
                                                             int64_t end) {
  auto key = std::make_pair(begin, end);
  auto it = state_->shards.find(key);
  if (it != state_->shards.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<ExampleSet>> data =
      LoadExamples(state_->config.data(), state_->config.model_def(),
                   /*train=*/true, begin, end - begin);
  if (!data.ok()) return data.status();
  LOG(INFO) << "loaded training examples [" << begin << ", " << end << ")";
  return state_->shards.emplace(key, *std::move(data)).first->second.get();
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
      if (!state_->params->collective()) return absl::OkStatus();
      return StepWithoutExamples(request, response);
    }
    return TrainBatch(request, response);
  }
  const int64_t begin = request.shard_begin(), end = request.shard_end();
  if (begin < 0 || begin > end || end > state_->train_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", request.step(), ": dataset shard [", begin, ", ", end,
        ") is not inside the ", state_->train_size, " training examples"));
  }
  absl::StatusOr<std::vector<int64_t>> ids =
      DecodeRaw<int64_t>(request.example_ids(), "example_ids");
  if (!ids.ok()) return ids.status();
  if (ids->empty()) {
    if (!state_->params->collective()) {
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
  if (state_->stream == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", request.step(),
                     " names stream positions, but the job's "
                     "data format \"",
                     state_->config.data().format(), "\" is not streamed"));
  }
  const StreamStep& step = request.stream();
  int64_t bad = 0;
  std::string why_bad;
  if (absl::Status s =
          state_->stream->Take(step.shard(), step.pass(), step.first(),
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
  ConfiguredState& state = *state_;
  const int64_t batch = batch_.size;
  // A model without tables has no rows to exchange.
  RowExchange* rows = state.rows->empty() ? nullptr : state.rows.get();

  auto t0 = std::chrono::steady_clock::now();
  // hybrid:ssp:S: at most S of this worker's row pushes still under way
  // when its rows are pulled (an earlier push's error surfaces here).
  if (rows != nullptr) {
    const int in_flight = state.mode.ssp_rows ? state.mode.staleness : 0;
    if (absl::Status s = rows->WaitForPushes(in_flight); !s.ok()) return s;
  }
  // Sync: the values after every global step before this one.
  const std::optional<int64_t> sync_step = SyncStepOf(request);
  std::future<absl::Status> row_pull;
  if (rows != nullptr) row_pull = rows->StartPull(batch_, sync_step);
  absl::Status dense = PrepareParameters(sync_step);
  absl::Status pulled = row_pull.valid() ? row_pull.get() : absl::OkStatus();
  if (!dense.ok()) return dense;
  if (!pulled.ok()) return pulled;
  response->set_pull_us(MicrosSince(t0));

  auto t1 = std::chrono::steady_clock::now();
  const uint64_t seed = DeriveSeed(state.config.seed(), request.step());
  const GraphBatch view =
      ViewOf(batch_, state.rows->pulled(), state.rows->positions());
  // Mirrored on GPUs with NCCL: the gradients stay where the backward pass
  // left them, scaled by this replica's weight, for the all-reduce.
  float* on_device = state.params->device_gradients();
  absl::StatusOr<GraphResult> result =
      on_device != nullptr
          ? state.graph->TrainStepOnDevice(view, seed,
                                           static_cast<float>(batch), on_device)
          : state.graph->TrainStep(view, seed, DenseGradients(),
                                   state.rows->gradients());
  // A device fault is reported here, before a bad gradient can be pushed.
  if (!result.ok()) return result.status();
  response->set_compute_us(MicrosSince(t1));
  response->set_loss(static_cast<float>(result->loss_sum / batch));
  response->set_examples(batch);
  response->set_correct(result->correct);
  // This worker's own gradient, each variable whole, clipped before the
  // push (before a sync step's scale): as Keras per replica under TF's
  // ParameterServerStrategy (docs/design.md#gradient-clipping).
  if (state.clip.any()) {
    std::vector<absl::Span<float>> clipped = DenseGradients();
    for (TableGradient& g : *state.rows->gradients()) {
      clipped.push_back(absl::MakeSpan(g.values));
    }
    state.clip.Clip(clipped);
  }

  auto t2 = std::chrono::steady_clock::now();
  const float scale = request.sync_scale();
  const SyncPush sync = SyncPushOf(request);
  const SyncPush* tag = &sync;
  // The rows go to the servers (or into the replica's gradients) while
  // the dense gradients are pushed, or all-reduced among the replicas.
  std::future<absl::Status> row_push;
  if (rows != nullptr) row_push = rows->StartPush(scale, tag);
  absl::Status pushed = state.params->Push({batch, scale, tag}, response);
  absl::Status rows_pushed =
      row_push.valid() ? row_push.get() : absl::OkStatus();
  if (!pushed.ok()) return pushed;
  if (!rows_pushed.ok()) return rows_pushed;
  response->set_push_us(MicrosSince(t2));
  return absl::OkStatus();
}

std::optional<int64_t> TrainingWorker::SyncStepOf(
    const StepRequest& request) const {
  if (!state_->mode.aggregates_steps() || request.sync_required() <= 0) {
    return std::nullopt;
  }
  return request.sync_step();
}

SyncPush TrainingWorker::SyncPushOf(const StepRequest& request) const {
  SyncPush sync;
  if (!SyncStepOf(request).has_value()) {
    // Asynchronous: the step's own number, 1-based, for the schedule.
    sync.step = request.step() + 1;
    return sync;
  }
  sync.step = request.sync_step();
  sync.required = request.sync_required();
  sync.part = request.sync_part();
  return sync;
}

std::vector<absl::Span<const float>> TrainingWorker::DenseValues() const {
  std::vector<absl::Span<const float>> values = state_->params->values();
  values.resize(state_->graph->dense_variables().size());
  return values;
}

std::vector<absl::Span<float>> TrainingWorker::DenseGradients() {
  std::vector<absl::Span<float>> gradients = state_->params->gradients();
  gradients.resize(state_->graph->dense_variables().size());
  return gradients;
}

absl::Status TrainingWorker::StepWithoutExamples(const StepRequest& request,
                                                 StepResponse* response) {
  const SyncPush sync = SyncPushOf(request);
  const SyncPush* tag = sync.lockstep() ? &sync : nullptr;
  // Hybrid:sync: the servers wait for every part of the step, this
  // replica's empty one too.
  std::future<absl::Status> row_push = tag != nullptr
                                           ? state_->rows->StartEmptyPush(sync)
                                           : std::future<absl::Status>();
  absl::Status reduced = state_->params->Push(
      {/*examples=*/0, request.sync_scale(), tag}, response);
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
  if (absl::Status s = state_->rows->WaitForPushes(0); !s.ok()) return s;
  const int64_t begin = request.begin(), end = request.end();
  int64_t test_size = 0;
  if (state_->stream != nullptr) {
    test_size = state_->stream->test_size();
  } else {
    absl::StatusOr<int64_t> n =
        DeclaredExamples(state_->config.data(), false, &counts_);
    if (!n.ok()) return n.status();
    test_size = *n;
  }
  if (begin < 0 || begin > end || end > test_size) {
    return absl::OutOfRangeError(absl::StrCat("evaluation range [", begin, ", ",
                                              end, ") is not inside the ",
                                              test_size, " test examples"));
  }
  if (state_->stream == nullptr && begin < end &&
      (state_->test_set == nullptr || begin < state_->test_begin ||
       end > state_->test_begin + state_->test_set->size())) {
    // Only the slice asked for (each epoch asks the same): each worker
    // evaluates its part of the test set, and every worker loading all of
    // it cost as much again as the evaluation. Loading verifies the
    // declared count up to the slice's end.
    absl::StatusOr<std::unique_ptr<ExampleSet>> test =
        LoadExamples(state_->config.data(), state_->config.model_def(),
                     /*train=*/false, begin, end - begin);
    if (!test.ok()) return test.status();
    state_->test_set = *std::move(test);
    state_->test_begin = begin;
  }
  // Evaluate the freshest parameters, not a prefetched set.
  CancelPrefetch();
  if (absl::Status s = state_->params->Pull(std::nullopt); !s.ok()) return s;
  if (absl::Status s = state_->graph->SetParameters(DenseValues()); !s.ok()) {
    return s;
  }
  // One probability per example: the exact AUC needs them all.
  const bool probabilities =
      state_->config.model_def().label().kind() == LabelDef::BINARY &&
      state_->graph->output_size() == 1;
  std::vector<int64_t> indices;
  for (int64_t at = begin; at < end; at += kEvaluateSlice) {
    const int64_t n = std::min(kEvaluateSlice, end - at);
    indices.resize(n);
    for (int64_t i = 0; i < n; ++i) indices[i] = at + i - state_->test_begin;
    if (absl::Status s = state_->stream != nullptr
                             ? state_->stream->TakeTest(at, at + n, &batch_)
                             : state_->test_set->Gather(indices, &batch_);
        !s.ok()) {
      return s;
    }
    // A growing table makes the rows of ids seen only in the test set,
    // with their deterministic initial values.
    if (!state_->rows->empty()) {
      if (absl::Status s = state_->rows->Pull(batch_); !s.ok()) return s;
    }
    absl::StatusOr<GraphResult> r = state_->graph->Evaluate(
        ViewOf(batch_, state_->rows->pulled(), state_->rows->positions()),
        probabilities ? &predictions_ : nullptr);
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
