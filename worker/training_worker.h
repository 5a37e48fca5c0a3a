#ifndef TESSERA_WORKER_TRAINING_WORKER_H_
#define TESSERA_WORKER_TRAINING_WORKER_H_

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/cluster_spec.h"
#include "common/training_mode.h"
#include "proto/worker_service.pb.h"
#include "ps_server/ps_client.h"
#include "worker/all_reducer.h"
#include "worker/backend.h"
#include "worker/ctr_worker.h"
#include "worker/mirrored_parameters.h"
#include "worker/mlp_model.h"
#include "worker/mnist_dataset.h"
#include "worker/sharded_parameters.h"

namespace tessera {

// What a worker does, without the RPC layer: take the job's configuration,
// then run steps (read the named examples, pull, forward, backward, push)
// and evaluations. Bad requests get a precise error and change nothing.
//
// Thread safety: one call at a time; the service serialises them.
class TrainingWorker {
 public:
  // `all_reducer` (may be null: no mirrored training) is this worker's
  // rank among the job's workers and must outlive the worker.
  TrainingWorker(ClusterSpec cluster, std::unique_ptr<Backend> backend,
                 PsClientOptions ps_options, AllReducer* all_reducer = nullptr);

  // Takes the job's configuration and loads this worker's dataset shard.
  // On error nothing changes: the worker keeps its previous configuration
  // (or stays unconfigured). On success the data loaded for an earlier
  // configuration is dropped, so files that changed are read again.
  absl::Status Configure(const WorkerConfig& config,
                         ConfigureResponse* response);
  absl::Status RunStep(const StepRequest& request, StepResponse* response);
  // Evaluates test examples [begin, end), loading the test set on first
  // use; InvalidArgument naming both sizes when its images do not have the
  // model's input_dim() pixels.
  absl::Status Evaluate(const EvaluateRequest& request,
                        EvaluateResponse* response);

  // Safe to call from any thread.
  bool configured() const { return configured_.load(); }
  const std::string& device_name() const { return device_name_; }

 private:
  // Configure for model kind "ctr".
  absl::Status ConfigureCtr(const WorkerConfig& config,
                            ConfigureResponse* response);
  // Waits for a prefetch in flight, if any, and returns its status.
  absl::Status DrainPrefetch();
  // Makes params_ hold parameters for this step: the prefetched set when
  // there is one, else a fresh pull; starts the next prefetch if enabled.
  absl::Status PrepareParameters();

  // The mirrored step after the forward and backward pass: all-reduce the
  // weighted gradients and apply them to this replica.
  absl::Status MirroredUpdate(int64_t batch, StepResponse* response);

  // The training examples [begin, end) of config_'s files, loaded on first
  // use and kept until the next successful Configure.
  absl::StatusOr<const MnistDataset*> TrainShard(int64_t begin, int64_t end);

  const ClusterSpec cluster_;
  const std::unique_ptr<Backend> backend_;
  const PsClientOptions ps_options_;
  const std::string device_name_;
  AllReducer* const all_reducer_;

  // Model kind "ctr": the click-through worker does the job's steps and
  // evaluations (the MLP members below stay unused).
  std::unique_ptr<CtrWorker> ctr_;

  WorkerConfig config_;
  TrainingMode mode_;
  // Mirrored mode: this worker's full replica (params_ stays null).
  std::unique_ptr<MirroredParameters> mirrored_;
  int64_t train_size_ = 0;  // examples in the training file (or subset)
  std::vector<std::unique_ptr<PsClient>> clients_;
  std::unique_ptr<MlpModel> model_;
  std::unique_ptr<ShardedParameters> params_;
  // With prefetching: a second set of buffers, filled by `prefetch_` while
  // a step computes with params_; the next step swaps them.
  std::unique_ptr<ShardedParameters> spare_;
  std::future<absl::Status> prefetch_;
  std::map<std::pair<int64_t, int64_t>, MnistDataset> shards_;
  std::unique_ptr<MnistDataset> test_set_;
  std::atomic<bool> configured_{false};

  // Batch staging, reused across steps.
  std::vector<float> batch_x_;
  std::vector<int32_t> batch_y_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_TRAINING_WORKER_H_
