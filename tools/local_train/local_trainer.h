// Trains a job in one process with no network: the workers' layer graph
// and data path, and the parameter servers' own shards in this process
// (ps_server/embedded/embedded_shards.h) with the job's optimizers, one
// shard per variable, updated in place after every step. Any job file runs
// here as it runs on a cluster, so it is the reference a distributed run is
// held to.
//
// Thread safety: one call at a time.

#ifndef TESSERA_TOOLS_LOCAL_TRAIN_LOCAL_TRAINER_H_
#define TESSERA_TOOLS_LOCAL_TRAIN_LOCAL_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/optimizer/gradient_clipping.h"
#include "data/example_set.h"
#include "proto/job.pb.h"
#include "ps_server/embedded/embedded_shards.h"
#include "worker/backend/backend.h"
#include "worker/nn/graph.h"

namespace tessera {

struct LocalEpoch {
  int epoch = 0;
  int64_t examples = 0;
  double seconds = 0;
  double train_loss = 0, train_accuracy = 0;
  double test_loss = 0, test_accuracy = 0;
  // Models with a BINARY label and one output; -1 otherwise.
  double auc = -1, log_loss = -1;
};

class LocalTrainer {
 public:
  // Builds the job's model, loads its training and test sets (after the
  // job's caps) and creates its variables. Errors name the bad part of the
  // job; `backend` must outlive the trainer.
  static absl::StatusOr<std::unique_ptr<LocalTrainer>> Create(
      const JobConfig& job, Backend* backend);

  // Replaces every variable's values, slots and update counts with the
  // newest valid checkpoint under checkpoint root `root` (tessera_keras
  // import's initial values, or a run's), as a parameter server restores
  // it. Errors name the checkpoint; on error the trainer is unusable.
  absl::Status WarmStart(const std::string& root);

  int64_t train_size() const { return train_->size(); }
  int64_t test_size() const { return test_->size(); }

  // One pass over the training set in an order drawn from the job's seed
  // and `epoch`, then the test set. `progress` (may be empty) is called
  // after each step with the examples done and the mean loss so far.
  absl::StatusOr<LocalEpoch> RunEpoch(
      int epoch, const std::function<void(int64_t, double)>& progress);

  // The mean loss of the last step RunEpoch or TrainBatch trained (before
  // its update), for a caller comparing steps with another trainer.
  double last_step_loss() const { return last_step_loss_; }

  // The first `steps` steps of epoch 1's order (fewer if the epoch ends);
  // returns each step's mean loss. Two trainers of one job on different
  // backends see the same batches and dropout masks.
  absl::StatusOr<std::vector<double>> TrainSteps(int64_t steps);

  // One training step on `batch`, gathered or streamed by the caller (a
  // worker's step from its data on: pull, forward and backward, apply);
  // returns the step's result. bench_input times the DLRM job's steps this
  // way from memory and from a TFRecord stream.
  absl::StatusOr<GraphResult> TrainBatch(const HostBatch& batch);

  // Writes every variable as a checkpoint of one parameter server under
  // `root` (common/checkpoint/checkpoint_dir.h), at the steps trained so far,
  // as a cluster's coordinator does, so tessera_export and tessera_predict read
  // it as they read a cluster's. Returns the checkpoint's folder.
  absl::StatusOr<std::string> SaveCheckpoint(const std::string& root,
                                             int epoch);

  // Every dense variable's current value, in the graph's order, with its
  // name.
  std::vector<std::pair<std::string, std::vector<float>>> DenseValues() const;

 private:
  LocalTrainer() = default;
  // Reads the dense variables, and the rows `batch` uses, from the shards.
  absl::Status Pull(const HostBatch& batch);
  absl::StatusOr<GraphResult> Step(const HostBatch& batch, uint64_t seed);
  absl::Status Evaluate(LocalEpoch* epoch);
  // The training examples in epoch `epoch`'s order.
  std::vector<int64_t> Order(int epoch) const;

  JobConfig job_;
  ModelDef model_;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<ExampleSet> train_, test_;
  EmbeddedShards shards_;
  std::vector<int> dense_;      // shards_' index, per dense variable
  std::vector<int> tables_;     // shards_' index, per table
  std::vector<int64_t> vocab_;  // per table; 0: growing
  std::vector<std::vector<float>> values_, grads_;  // per dense variable
  // Each variable's clipping, by its optimizer (VariableOptimizer): dense
  // variables, then tables.
  GradientClipPlan clip_plan_;
  int64_t step_ = 0;
  double last_step_loss_ = 0;

  // Per step, reused.
  HostBatch batch_;
  std::vector<int64_t> ids_;
  std::vector<std::vector<int64_t>> unique_, positions_;
  std::vector<std::vector<float>> rows_;
  std::vector<TableGradient> table_grads_;
  std::vector<int64_t> push_ids_;
  std::vector<absl::Span<float>> clip_spans_;
};

}  // namespace tessera

#endif  // TESSERA_TOOLS_LOCAL_TRAIN_LOCAL_TRAINER_H_
