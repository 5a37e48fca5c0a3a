// The click-through model's side of a worker (ModelConfig kind "ctr"): a
// step gathers its examples from the Criteo-format training file, localizes
// each field's ids (SparseParameters), pulls the distinct embedding rows and
// the dense layers from all parameter servers in parallel, runs CtrModel
// forward and backward, and pushes the sparse row gradients (one summed row
// per distinct id) and the dense gradients, again in parallel.
//
// Asynchronous training only (modes async and ssp): row pushes carry no
// sync step. Evaluation returns every test example's probability and label
// so the coordinator computes the exact AUC. Evaluating pulls the test
// batches' rows, so a growing table also makes the rows of ids seen only in
// the test set (with their deterministic initial values).
//
// Thread safety: one call at a time (TrainingWorker serialises them).

#ifndef TESSERA_WORKER_CTR_WORKER_H_
#define TESSERA_WORKER_CTR_WORKER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/worker_service.pb.h"
#include "ps_server/ps_client.h"
#include "worker/backend.h"
#include "worker/criteo_reader.h"
#include "worker/ctr_dataset.h"
#include "worker/ctr_model.h"
#include "worker/sharded_parameters.h"
#include "worker/sparse_parameters.h"

namespace tessera {

class CtrWorker {
 public:
  // Checks the configuration and loads the worker's own dataset shard.
  // `clients[k]` talks to ps task k; they and `backend` must outlive the
  // worker. Errors name the bad field, file or placement.
  static absl::StatusOr<std::unique_ptr<CtrWorker>> Create(
      const WorkerConfig& config, std::vector<PsClient*> clients,
      Backend* backend);

  // Examples in the training file (or the job's subset) and in the own
  // shard.
  int64_t train_size() const { return train_size_; }
  int64_t own_shard_size() const { return own_shard_size_; }

  absl::Status RunStep(const StepRequest& request, StepResponse* response);
  absl::Status Evaluate(const EvaluateRequest& request,
                        EvaluateResponse* response);

 private:
  CtrWorker(const WorkerConfig& config, std::unique_ptr<CtrModel> model,
            std::unique_ptr<SparseParameters> sparse,
            std::unique_ptr<ShardedParameters> dense, int64_t train_size);

  // The training examples [begin, end), loaded on first use.
  absl::StatusOr<const CtrDataset*> TrainShard(int64_t begin, int64_t end);
  // Gathers `examples` of `data`, localizes and pulls their rows, and fills
  // inputs_; the dense layers are pulled beside the rows.
  absl::Status Prepare(const CtrDataset& data,
                       absl::Span<const int64_t> examples, bool pull_dense);
  CtrModelInput Input();

  const WorkerConfig config_;
  const CriteoFormat format_;
  const std::unique_ptr<CtrModel> model_;
  const std::unique_ptr<SparseParameters> sparse_;
  const std::unique_ptr<ShardedParameters> dense_;
  const int64_t train_size_;
  int64_t own_shard_size_ = 0;
  std::map<std::pair<int64_t, int64_t>, CtrDataset> shards_;
  std::unique_ptr<CtrDataset> test_set_;

  // Per step, reused.
  CtrBatch batch_;
  std::vector<std::vector<int64_t>> unique_, positions_;
  std::vector<std::vector<float>> rows_;
  std::vector<CtrFieldInput> inputs_;
  std::vector<CtrSparseGrad> sparse_grads_;
  std::vector<std::vector<int64_t>> push_ids_;
  std::vector<std::vector<float>> push_grads_;
  std::vector<float> probabilities_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_CTR_WORKER_H_
