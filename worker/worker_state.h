// What a configuration makes of a worker: the job's configuration and
// mode, the model's graph, its dense variables (a ParameterSet) and its
// tables' rows (a RowExchange), the clients to the parameter servers and
// the training data. BuildWorkerState makes all of it from a
// configuration without touching the worker, so TrainingWorker::Configure
// replaces its state whole or, on any error, not at all.

#ifndef TESSERA_WORKER_WORKER_STATE_H_
#define TESSERA_WORKER_WORKER_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cluster/cluster_spec.h"
#include "common/optimizer/gradient_clipping.h"
#include "common/rpc/grpc_channel.h"
#include "common/training_mode.h"
#include "data/count_cache/verified_count_cache.h"
#include "data/example_set.h"
#include "data/stream/stream_examples.h"
#include "proto/worker_service.pb.h"
#include "ps_server/client/ps_client.h"
#include "worker/backend/backend.h"
#include "worker/collective/all_reducer.h"
#include "worker/nn/graph.h"
#include "worker/params/mirrored_parameters.h"
#include "worker/params/parameter_set.h"
#include "worker/params/row_exchange.h"

namespace tessera {

// Members in the order they are made: each is destroyed before what it
// uses (the rows and parameters before the graph and the clients).
struct ConfiguredState {
  WorkerConfig config;
  TrainingMode mode;
  int64_t train_size = 0;  // examples in the training files (or subset)
  int64_t test_size = 0;
  int64_t own_size = 0;  // this worker's shard (or stream shard)

  std::vector<std::unique_ptr<PsClient>> clients;
  std::unique_ptr<Graph> graph;
  // The dense variables: sharded on the servers, or this worker's full
  // replica (mirrored, hybrid), which `replica` then names (for its
  // checkpoints; the row exchange keeps tables in it); else null.
  std::unique_ptr<ParameterSet> params;
  MirroredParameters* replica = nullptr;
  // With prefetching: a second set of buffers, filled while a step
  // computes with `params`; the next step swaps them.
  std::unique_ptr<ParameterSet> spare;
  std::unique_ptr<RowExchange> rows;
  // What a step clips before its push (docs/design.md#gradient-clipping):
  // the dense variables on the servers and the tables on the servers, the
  // graph's dense variables then its tables, each by the optimizer that
  // trains it; a replica clips its own after the all-reduce.
  GradientClipPlan clip;

  // The training examples per dataset shard [begin, end), loaded on first
  // use; the test examples from test_begin on, loaded by the evaluation
  // that asks for them; streamed formats read `stream` instead of both.
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<ExampleSet>> shards;
  std::unique_ptr<ExampleSet> test_set;
  int64_t test_begin = 0;
  std::unique_ptr<StreamExamples> stream;
};

// What every state of a worker is built with; all outlive the states.
struct WorkerContext {
  const ClusterSpec* cluster = nullptr;
  Backend* backend = nullptr;
  PsClientOptions ps_options;
  const ChannelSecurity* security = nullptr;
  AllReducer* all_reducer = nullptr;  // null: no mirrored training
  VerifiedCountCache* counts = nullptr;
};

// The state `config` describes: checks that the mode and the data format
// fit the model, builds the graph, the parameters, the row exchange and
// the clients, and loads this worker's dataset shard. The first call of a
// streamed job (no train shards yet) answers with the data's assignment
// in *response and returns no state (null): the next call configures.
absl::StatusOr<std::unique_ptr<ConfiguredState>> BuildWorkerState(
    const WorkerConfig& config, const WorkerContext& context,
    ConfigureResponse* response);

}  // namespace tessera

#endif  // TESSERA_WORKER_WORKER_STATE_H_
