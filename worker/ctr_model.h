// The click-through model on any backend:
//
//   concat(bag_0 .. bag_{F-1}, dense) -> [Dense(h, ReLU) -> Dropout]*
//     -> Dense(1) -> sigmoid cross-entropy
//
// where bag_f is the sum or the mean (ModelConfig.combiner) of field f's
// embedding rows of an example (zeros for an empty bag). The embedding
// tables are too big to hold: each step gets, per field, only the rows its
// batch uses (pulled by the worker) and the bags' ids as indices of those
// rows (LocalizeIds in worker/ctr_dataset.h), and returns their gradients
// as sparse rows. The dense layers live in the model like MlpModel's.
//
// Its variables are exactly ModelVariables(config): the tables
// "embedding_{f}" (sparse) first, then the dense layers.
//
// Thread safety: one thread at a time (it owns activation buffers).

#ifndef TESSERA_WORKER_CTR_MODEL_H_
#define TESSERA_WORKER_CTR_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "proto/job.pb.h"
#include "worker/backend.h"

namespace tessera {

// One field of a batch. Example b's bag is rows[offsets[b] ..
// offsets[b + 1]), each an index of a row of `table`, the field's rows
// gathered for this batch ([table.size() / dim, dim], row-major).
struct CtrFieldInput {
  absl::Span<const int64_t> offsets;  // batch + 1 entries, offsets[0] == 0
  absl::Span<const int64_t> rows;
  absl::Span<const float> table;
};

// A batch in host memory.
struct CtrModelInput {
  int64_t batch = 0;
  absl::Span<const float> labels;          // batch, each 0 or 1 (or in between)
  absl::Span<const float> dense;           // [batch, num_dense]
  absl::Span<const CtrFieldInput> fields;  // num_fields
};

// The gradient of one field's gathered table: the distinct rows the batch
// used, ascending, and the gradient of each (summed over its occurrences).
struct CtrSparseGrad {
  std::vector<int64_t> rows;
  std::vector<float> values;  // [rows.size(), dim]
};

struct CtrBatchResult {
  double loss_sum = 0;  // summed over the batch
  int64_t examples = 0;
};

class CtrModel {
 public:
  // `backend` must outlive the model. InvalidArgument for a config that is
  // not a valid "ctr" model.
  static absl::StatusOr<std::unique_ptr<CtrModel>> Create(
      const ModelConfig& config, Backend* backend);

  // Every variable, the tables first (ModelVariables order).
  const std::vector<VariableDef>& variables() const { return variables_; }
  // The dense layers' variables only: variables() after the tables.
  absl::Span<const VariableDef> dense_variables() const {
    return absl::MakeConstSpan(variables_).subspan(num_fields_);
  }
  int num_fields() const { return num_fields_; }
  int64_t embedding_dim() const { return dim_; }
  int64_t num_dense() const { return num_dense_; }
  Backend::Combiner combiner() const { return combiner_; }

  // Copies the dense layers' values (dense_variables() order, exact sizes)
  // to the device. InvalidArgument names a variable whose size is wrong.
  absl::Status SetDenseParameters(
      absl::Span<const absl::Span<const float>> values);

  // One forward and backward pass, dropout drawn from `seed`. Writes the
  // gradients of the batch's mean loss: of the dense layers into
  // `dense_grads` (host memory, dense_variables() order, exact sizes) and
  // of each field's gathered rows into (*sparse_grads)[f]. If
  // `probabilities` is not null it gets each example's predicted click
  // probability (with dropout, as trained). The input is checked first
  // (InvalidArgument naming the field and the bad entry); a device error
  // is returned as the backend reports it.
  absl::StatusOr<CtrBatchResult> TrainStep(
      const CtrModelInput& input, uint64_t seed,
      absl::Span<const absl::Span<float>> dense_grads,
      std::vector<CtrSparseGrad>* sparse_grads,
      std::vector<float>* probabilities = nullptr);

  // Forward pass without dropout; `probabilities` as for TrainStep.
  absl::StatusOr<CtrBatchResult> Evaluate(
      const CtrModelInput& input, std::vector<float>* probabilities = nullptr);

 private:
  struct FieldBuffers {
    int64_t table_capacity = 0, ids_capacity = 0;
    DeviceArray<float> table;
    DeviceArray<int64_t> offsets, rows, unique;
    DeviceArray<float> bag, dbag, drows, summed;
  };

  CtrModel(std::vector<VariableDef> variables, const ModelConfig& config,
           std::vector<int64_t> widths, Backend* backend);
  absl::Status CheckInput(const CtrModelInput& input) const;
  void Reserve(const CtrModelInput& input);
  void Forward(const CtrModelInput& input, bool training, uint64_t seed);
  absl::StatusOr<CtrBatchResult> Finish(const CtrModelInput& input,
                                        double loss_sum,
                                        std::vector<float>* probabilities);

  const std::vector<VariableDef> variables_;
  const int num_fields_;
  const int64_t dim_;
  const int64_t num_dense_;
  const Backend::Combiner combiner_;
  const float dropout_;
  const std::vector<int64_t> widths_;  // input, hidden..., 1
  Backend* const backend_;

  std::vector<DeviceArray<float>> params_;  // kernel, bias per layer
  std::vector<DeviceArray<float>> grads_;
  std::vector<FieldBuffers> fields_;
  int64_t capacity_ = 0;
  DeviceArray<float> dense_, labels_;
  // As in MlpModel: per layer l, pre_[l] after ReLU and before dropout,
  // post_[l] after dropout; the last layer's pre_ holds the logits.
  std::vector<DeviceArray<float>> pre_, post_, delta_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_CTR_MODEL_H_
