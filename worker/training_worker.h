#ifndef TESSERA_WORKER_TRAINING_WORKER_H_
#define TESSERA_WORKER_TRAINING_WORKER_H_

#include <atomic>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/cluster/cluster_spec.h"
#include "common/rpc/grpc_channel.h"
#include "common/serial_executor.h"
#include "common/training_mode.h"
#include "data/count_cache/verified_count_cache.h"
#include "data/example_set.h"
#include "data/inflate_cache/inflated_files.h"
#include "data/stream/stream_examples.h"
#include "proto/worker_service.pb.h"
#include "ps_server/client/ps_client.h"
#include "worker/backend/backend.h"
#include "worker/collective/all_reducer.h"
#include "worker/nn/graph.h"
#include "worker/worker_state.h"

namespace tessera {

// What a worker does, without the RPC layer, for any model description:
// take the job's configuration, then run steps (gather the named
// examples, pull the variables the graph names — dense ones whole,
// embedding tables by the rows the batch uses — forward, backward, push
// dense gradients and sparse row gradients) and evaluations. Bad requests
// get a precise error and change nothing.
//
// Thread safety: one call at a time; the service serialises them.
class TrainingWorker {
 public:
  // `all_reducer` (may be null: no mirrored training) is this worker's
  // rank among the job's workers and must outlive the worker. The channels
  // to the parameter servers are made with `security` (the job's token
  // and TLS).
  // Gzipped data files are read through inflated copies in
  // `inflated_data_dir`, shared by the workers of a machine
  // (data/inflate_cache/inflated_files.h); empty: read as they are.
  TrainingWorker(ClusterSpec cluster, std::unique_ptr<Backend> backend,
                 PsClientOptions ps_options, AllReducer* all_reducer = nullptr,
                 ChannelSecurity security = {},
                 std::string inflated_data_dir = "");

  // Takes the job's configuration: builds the model's graph, checks that
  // the mode and the data format fit the model, and loads this worker's
  // dataset shard. On error nothing changes: the worker keeps its previous
  // configuration (or stays unconfigured). On success the data loaded for
  // an earlier configuration is dropped, so files that changed are read
  // again.
  absl::Status Configure(const WorkerConfig& config,
                         ConfigureResponse* response);
  absl::Status RunStep(const StepRequest& request, StepResponse* response);
  // Evaluates test examples [begin, end), loading the test set on first
  // use. A model with a BINARY label and one output also returns every
  // example's probability and label (for the exact AUC).
  absl::Status Evaluate(const EvaluateRequest& request,
                        EvaluateResponse* response);

  // Mirrored and hybrid jobs (worker/training_worker_replica.cc): writes
  // this worker's replica into the checkpoint folder request.directory();
  // fills it from a checkpoint once this worker's row pushes in flight
  // ended, and starts the all-reduce over at the request's epoch.
  // FailedPrecondition before Configure or in a mode without replicas.
  absl::Status SaveReplica(const SaveShardsRequest& request,
                           SaveShardsResponse* response);
  absl::Status RestoreReplica(const RestoreReplicaRequest& request,
                              RestoreShardsResponse* response);
  // Fails this worker's all-reduce in progress, and every later one until
  // RestoreReplica, at once (AllReducer::Abort). Safe to call from any
  // thread, while a step runs.
  void Interrupt(const std::string& reason);

  // Safe to call from any thread.
  bool configured() const { return configured_.load(); }
  const std::string& device_name() const { return device_name_; }

 private:
  // Waits for a prefetch in flight, if any, and returns its status.
  absl::Status DrainPrefetch();
  // Waits for a prefetch in flight and drops what it staged.
  void CancelPrefetch();
  // A chief's configuration with a collective epoch: every all-reduce
  // starts over at it, a worker of the cluster spec on the spec's ring.
  absl::Status StartCollectiveOver(const WorkerConfig& config);
  // Makes state_->params and the graph's parameters this step's: the prefetched
  // set (already uploaded to the device) when there is one, else a fresh
  // pull (for a replica: its own values); starts the next prefetch if
  // enabled, which pulls and uploads while this step computes.
  // `sync_step`: sync mode's global step the values are pulled for.
  absl::Status PrepareParameters(std::optional<int64_t> sync_step);
  // The global step `request` belongs to, in modes whose servers
  // aggregate steps (sync, hybrid:sync); nullopt otherwise.
  std::optional<int64_t> SyncStepOf(const StepRequest& request) const;
  // The tag of `request`'s pushes (required 0: untagged).
  SyncPush SyncPushOf(const StepRequest& request) const;
  // state_->params's dense variables and their gradients, without a replica's
  // kept tables after them: what the graph computes with.
  std::vector<absl::Span<const float>> DenseValues() const;
  std::vector<absl::Span<float>> DenseGradients();
  // A worker without examples in a collective step (a replica): takes
  // part in the push with zeros and, in hybrid:sync, sends the servers
  // its empty part of the step.
  absl::Status StepWithoutExamples(const StepRequest& request,
                                   StepResponse* response);

  // Streamed formats: fills batch_ with the step's stream positions.
  absl::Status StreamBatch(const StepRequest& request, StepResponse* response);
  // The step on batch_, from the pull to the push.
  absl::Status TrainBatch(const StepRequest& request, StepResponse* response);

  // The training examples [begin, end) of the configured files, loaded on
  // first use and kept until the next successful Configure.
  absl::StatusOr<const ExampleSet*> TrainShard(int64_t begin, int64_t end);

  const ClusterSpec cluster_;
  const std::unique_ptr<Backend> backend_;
  const PsClientOptions ps_options_;
  const ChannelSecurity security_;
  const std::string device_name_;
  AllReducer* const all_reducer_;

  // The data files' verified counts, for this process: a configuration
  // again (a restarted chief probes the data anew) reads no file through.
  VerifiedCountCache counts_;
  const InflatedFiles inflated_;
  // What the last successful Configure built (null before it), replaced
  // whole by the next.
  std::unique_ptr<ConfiguredState> state_;
  // The prefetch of state_->spare in flight, if any.
  std::future<absl::Status> prefetch_;
  std::atomic<bool> configured_{false};

  // Per step, reused.
  HostBatch batch_;
  std::vector<float> predictions_;

  // Runs the prefetching pulls on one thread kept for the worker's life,
  // not a thread started per step. Last, so it finishes a pull in flight
  // while the buffers and clients it uses still exist.
  SerialExecutor prefetcher_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_TRAINING_WORKER_H_
