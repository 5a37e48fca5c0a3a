// Trains CtrModel in one process, without parameter servers: the embedding
// tables live in host hash maps (a row is made on an id's first use, as a
// growing table on a parameter server makes it) and are updated with
// Adagrad; the dense layers with Adam. It is the reference the distributed
// run is compared with, and tells which hyper-parameters reach the
// generator's best AUC.
//
// Thread safety: one thread at a time.

#ifndef TESSERA_WORKER_CTR_LOCAL_TRAINER_H_
#define TESSERA_WORKER_CTR_LOCAL_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "worker/ctr_dataset.h"
#include "worker/ctr_model.h"

namespace tessera {

struct LocalCtrTrainerOptions {
  int64_t batch_size = 256;
  // Adagrad on the embedding rows, with TF's initial accumulator.
  float embedding_learning_rate = 0.05f;
  float initial_accumulator = 0.1f;
  // Adam (Keras' defaults) on the dense layers.
  float dense_learning_rate = 1e-3f;
  uint64_t seed = 1;  // initial values, shuffling and dropout
};

class LocalCtrTrainer {
 public:
  // `backend` must outlive the trainer.
  static absl::StatusOr<std::unique_ptr<LocalCtrTrainer>> Create(
      const ModelConfig& config, const LocalCtrTrainerOptions& options,
      Backend* backend);

  // One pass over `data` in an order shuffled by (seed, epoch); returns the
  // mean training loss. The data set must match the model's fields and
  // dense features (InvalidArgument otherwise).
  absl::StatusOr<double> TrainEpoch(const CtrDataset& data, int epoch);

  // The predicted click probability of every example of `data`. Ids never
  // trained on get their initial rows (not stored).
  absl::StatusOr<std::vector<float>> Predict(const CtrDataset& data);

  // Rows made so far in field f's table.
  int64_t table_rows(int f) const {
    return static_cast<int64_t>(tables_[f].index.size());
  }

 private:
  struct Table {
    Initializer initializer;
    absl::flat_hash_map<int64_t, int64_t> index;  // id -> row
    std::vector<float> values, accumulators;      // [rows, dim]
  };

  LocalCtrTrainer(std::unique_ptr<CtrModel> model,
                  const LocalCtrTrainerOptions& options);
  absl::Status CheckData(const CtrDataset& data) const;
  // Builds the model's input for `examples`; makes missing rows when
  // `create` (else uses initial values in scratch rows).
  void Prepare(const CtrDataset& data, absl::Span<const int64_t> examples,
               bool create);
  void ApplyDense();
  void ApplySparse();

  const std::unique_ptr<CtrModel> model_;
  const LocalCtrTrainerOptions options_;
  std::vector<Table> tables_;
  std::vector<std::vector<float>> dense_, dense_grads_, adam_m_, adam_v_;
  int64_t adam_steps_ = 0;

  // Per step, reused.
  CtrBatch batch_;
  std::vector<std::vector<int64_t>> unique_, rows_;
  std::vector<std::vector<float>> gathered_;
  std::vector<CtrFieldInput> inputs_;
  std::vector<CtrSparseGrad> sparse_grads_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_CTR_LOCAL_TRAINER_H_
