#include "worker/worker_state.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/data_format.h"
#include "common/model/model_graph.h"
#include "common/model/model_support.h"
#include "data/stream/file_assignment.h"
#include "glog/logging.h"
#include "worker/params/replicated_tables.h"
#include "worker/params/sharded_parameters.h"

namespace tessera {
namespace {

// The mode `config` names, if it and the data format fit the model.
absl::StatusOr<TrainingMode> CheckConfig(const WorkerConfig& config,
                                         const ModelGraph& described) {
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
  if (absl::Status s = CheckModeFits(described.variables, *mode, replicated);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckDataFits(config.model_def(), config.data().format());
      !s.ok()) {
    return s;
  }
  return mode;
}

// The coordinator's first call of a streamed job: this worker reads the
// data, so it globs, counts and assigns the files (AssignStreamedData) and
// answers with the assignment.
absl::Status AnswerAssignment(const WorkerConfig& config,
                              const WorkerContext& context,
                              ConfigureResponse* response) {
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
  response->set_device(context.backend->device_name());
  return absl::OkStatus();
}

// The data's counts into *state: streamed formats take the shards the
// coordinator sends and load nothing here.
absl::Status CountData(const WorkerConfig& config, VerifiedCountCache* counts,
                       ConfiguredState* state) {
  if (IsStreamedFormat(config.data().format())) {
    absl::StatusOr<std::unique_ptr<StreamExamples>> created =
        StreamExamples::Create(
            config.data(), config.model_def(), config.seed(),
            {config.train_shards().begin(), config.train_shards().end()},
            {config.test_files().begin(), config.test_files().end()});
    if (!created.ok()) return created.status();
    state->stream = *std::move(created);
    state->train_size = state->stream->train_size();
    state->test_size = state->stream->test_size();
    state->own_size = state->stream->shard_size(config.worker_index());
    return absl::OkStatus();
  }
  // The coordinator plans by the counts worker 0 answers when probed with
  // an empty shard: those are verified, each file read through. A worker
  // given its shard reads only the files' headers here and loads (so
  // checks) its own examples below, where each worker read both files
  // through before.
  const bool probe = config.train_begin() == config.train_end();
  auto count = probe ? CountExamples : DeclaredExamples;
  absl::StatusOr<int64_t> train_size = count(config.data(), true, counts);
  if (!train_size.ok()) return train_size.status();
  if (config.train_begin() < 0 || config.train_begin() > config.train_end() ||
      config.train_end() > *train_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset shard [", config.train_begin(), ", ", config.train_end(),
        ") is not inside the ", *train_size, " training examples"));
  }
  absl::StatusOr<int64_t> test_size = count(config.data(), false, counts);
  if (!test_size.ok()) return test_size.status();
  state->train_size = *train_size;
  state->test_size = *test_size;
  return absl::OkStatus();
}

// This worker's dataset shard, loaded (so checked) whole.
absl::Status LoadOwnShard(const WorkerConfig& config, ConfiguredState* state) {
  absl::StatusOr<std::unique_ptr<ExampleSet>> own = LoadExamples(
      config.data(), config.model_def(), /*train=*/true, config.train_begin(),
      config.train_end() - config.train_begin());
  if (!own.ok()) return own.status();
  LOG(INFO) << "loaded training examples [" << config.train_begin() << ", "
            << config.train_end() << ")";
  state->own_size = (*own)->size();
  state->shards.emplace(
      std::make_pair(config.train_begin(), config.train_end()),
      *std::move(own));
  return absl::OkStatus();
}

// Mirrored and hybrid: this worker's full replica, in step with the other
// workers' through the all-reduce group, which must be this job's.
absl::StatusOr<std::unique_ptr<MirroredParameters>> BuildReplica(
    const WorkerConfig& config, const WorkerContext& context,
    const TrainingMode& mode, const Graph& graph,
    const ReplicatedTables& kept) {
  AllReducer* group = context.all_reducer;
  // A worker that joined a running job (an index past the job's first
  // workers) is given its place when the chief re-forms the ring at a
  // round boundary (RestoreReplica), before its first step.
  const bool joined = config.worker_index() >= config.num_workers();
  // A chief's configuration (every chief's has a collective epoch) puts a
  // worker of the cluster spec back on the spec's ring (Configure), so the
  // job must match that ring, not what joins and drains under an earlier
  // chief made of it. A group that cannot re-form (Configure only restarts
  // it) keeps the rank and size it started with, which must match.
  const bool to_spec =
      group != nullptr && group->can_reform() && config.collective_epoch() != 0;
  const int rank =
      to_spec ? context.cluster->task().index : (group ? group->rank() : -1);
  const int ranks = to_spec ? context.cluster->num_tasks("worker")
                            : (group ? group->num_ranks() : 0);
  if (group == nullptr || (!joined && (ranks != config.num_workers() ||
                                       rank != config.worker_index()))) {
    return absl::FailedPreconditionError(absl::StrCat(
        mode.ToString(), " mode: the job has ", config.num_workers(),
        " workers and names this one ", config.worker_index(),
        ", but this worker's all-reduce group was started as rank ", rank,
        " of ", ranks));
  }
  // Every replica builds the same initial values from the same seed; the
  // tables it keeps whole follow the dense variables.
  std::vector<VariableDef> variables = graph.dense_variables();
  variables.insert(variables.end(), kept.variables().begin(),
                   kept.variables().end());
  absl::StatusOr<std::unique_ptr<MirroredParameters>> replica =
      MirroredParameters::Create(variables, config.optimizer(),
                                 context.backend);
  if (!replica.ok()) return replica.status();
  (*replica)->set_collective({group, context.backend,
                              /*device_sum=*/graph.tables().empty()});
  return replica;
}

// The dense variables on the parameter servers into state->params, and
// with prefetching the second set into state->spare.
absl::Status BuildServed(const WorkerConfig& config,
                         const WorkerContext& context,
                         const std::vector<PsClient*>& clients,
                         ConfiguredState* state) {
  Graph& graph = *state->graph;
  const std::vector<VariableDef>& dense = graph.dense_variables();
  // Where the device is the host, the pulls land in the graph's own
  // buffers and the pushes go out from them. Not with prefetching: the
  // next step's pull must not write what this step computes with.
  const ShardedParameters::Borrowed in_graph{graph.HostVisibleValues(),
                                             graph.HostVisibleGradients()};
  const bool prefetch = config.prefetch_parameters();
  const bool borrow = !prefetch && !in_graph.values.empty();
  absl::StatusOr<std::unique_ptr<ShardedParameters>> sharded =
      ShardedParameters::Create(dense, config.variables(), clients,
                                context.backend, borrow ? &in_graph : nullptr);
  if (!sharded.ok()) return sharded.status();
  state->params = *std::move(sharded);
  if (!prefetch) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<ShardedParameters>> second =
      ShardedParameters::Create(dense, config.variables(), clients,
                                context.backend);
  if (!second.ok()) return second.status();
  state->spare = *std::move(second);
  // The prefetched set goes to the device while a step computes.
  return graph.PrepareStaging();
}

// The parameters and the row exchange of state->graph into *state.
absl::Status BuildParameters(const WorkerConfig& config,
                             const WorkerContext& context,
                             ReplicatedTables kept, ConfiguredState* state) {
  const std::vector<std::string>& ps = context.cluster->tasks("ps");
  std::vector<PsClient*> clients;
  for (size_t k = 0; k < ps.size(); ++k) {
    state->clients.push_back(std::make_unique<PsClient>(
        ps[k], static_cast<int>(k), MakeChannel(ps[k], *context.security),
        context.ps_options));
    clients.push_back(state->clients.back().get());
  }
  if (state->mode.replicates_dense()) {
    absl::StatusOr<std::unique_ptr<MirroredParameters>> replica =
        BuildReplica(config, context, state->mode, *state->graph, kept);
    if (!replica.ok()) return replica.status();
    state->replica = replica->get();
    state->params = *std::move(replica);
  } else if (absl::Status s = BuildServed(config, context, clients, state);
             !s.ok()) {
    return s;
  }
  RowExchange::Options rows;
  rows.graph = state->graph.get();
  rows.kept = std::move(kept);
  rows.replica = state->replica;
  rows.servers = state->mode.uses_parameter_servers();
  rows.placements = &config.variables();
  rows.clients = clients;
  rows.pushes_in_flight = state->mode.ssp_rows ? state->mode.staleness : 0;
  rows.host_memory = context.backend;
  absl::StatusOr<std::unique_ptr<RowExchange>> exchange =
      RowExchange::Create(std::move(rows));
  if (!exchange.ok()) return exchange.status();
  state->rows = *std::move(exchange);
  return absl::OkStatus();
}

// ConfiguredState::clip: a replica's variables (dense in mirrored and hybrid
// modes, the tables it keeps) are clipped by the replica after its
// all-reduce, a moving statistic never; the rest by its optimizer here.
// Where the servers aggregate steps, a global norm is the global batch's,
// which the servers clip by (coordinator/step_norm_exchange.h): the worker
// pushes such an optimizer's gradients as they are.
absl::StatusOr<GradientClipPlan> PushClipPlan(const WorkerConfig& config,
                                              const TrainingMode& mode,
                                              const Graph& graph) {
  auto pushed = [&](const OptimizerConfig* o) -> const OptimizerConfig* {
    return o != nullptr && mode.aggregates_steps() &&
                   o->clipping().global_norm() > 0
               ? nullptr
               : o;
  };
  std::vector<const OptimizerConfig*> optimizers;
  std::vector<std::string> names;
  for (const VariableDef& v : graph.dense_variables()) {
    optimizers.push_back(mode.replicates_dense() || v.update_rule.has_value()
                             ? nullptr
                             : pushed(&config.optimizer()));
    names.push_back(v.name);
  }
  for (const VariableDef& t : graph.tables()) {
    const OptimizerConfig* optimizer = nullptr;
    if (!config.replicated_tables().count(t.name)) {
      auto it = config.sharded_tables().find(t.name);
      optimizer = it != config.sharded_tables().end() ? &it->second
                                                      : &config.optimizer();
    }
    optimizers.push_back(pushed(optimizer));
    names.push_back(t.name);
  }
  return GradientClipPlan::Create(optimizers, names);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConfiguredState>> BuildWorkerState(
    const WorkerConfig& config, const WorkerContext& context,
    ConfigureResponse* response) {
  absl::StatusOr<ModelGraph> described =
      BuildModelGraph(config.model_def(), config.seed());
  if (!described.ok()) return described.status();
  absl::StatusOr<TrainingMode> mode = CheckConfig(config, *described);
  if (!mode.ok()) return mode.status();
  auto state = std::make_unique<ConfiguredState>();
  state->config = config;
  state->mode = *mode;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, context.backend);
  if (!graph.ok()) return graph.status();
  state->graph = *std::move(graph);
  absl::StatusOr<GradientClipPlan> clip =
      PushClipPlan(config, *mode, *state->graph);
  if (!clip.ok()) return clip.status();
  state->clip = *std::move(clip);
  absl::StatusOr<ReplicatedTables> kept = ReplicatedTables::Create(
      state->graph->tables(), config.replicated_tables());
  if (!kept.ok()) return kept.status();
  if (IsStreamedFormat(config.data().format()) &&
      config.train_shards_size() == 0) {
    if (absl::Status s = AnswerAssignment(config, context, response); !s.ok()) {
      return s;
    }
    return nullptr;  // configured by the next call
  }
  // The data is counted before the parameters are made and this worker's
  // shard loaded after them: the errors come in the order they always
  // did.
  if (absl::Status s = CountData(config, context.counts, state.get());
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          BuildParameters(config, context, *std::move(kept), state.get());
      !s.ok()) {
    return s;
  }
  if (state->stream == nullptr) {
    if (absl::Status s = LoadOwnShard(config, state.get()); !s.ok()) return s;
  }
  return state;
}

}  // namespace tessera
