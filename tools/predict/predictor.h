// Batch inference from a trained model with no parameter server: the
// worker's layer graph (worker/nn) on a backend, fed the whole model once.
// An id a growing table does not hold reads a row of zeros, as the ONNX
// export's tables do (tools/export/onnx_export.h), so both give the same
// numbers; training instead creates the row on first use.
#ifndef TESSERA_TOOLS_PREDICT_PREDICTOR_H_
#define TESSERA_TOOLS_PREDICT_PREDICTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "data/example_set.h"
#include "tools/export/trained_model.h"
#include "worker/backend/backend.h"
#include "worker/nn/graph.h"

namespace tessera {

// Thread safety: one call at a time.
class Predictor {
 public:
  // `model` and `backend` must outlive the predictor, which reads the
  // tables where the model holds them (no copy: a table may be most of
  // the machine's memory).
  static absl::StatusOr<std::unique_ptr<Predictor>> Create(
      const TrainedModel& model, Backend* backend);

  // Writes the loss head's output for each example of `batch` into
  // *outputs (output_size() values per example: a sigmoid head's
  // probability, a softmax head's class probabilities, a regression's
  // value) and returns the batch's loss and correct count against its
  // labels.
  absl::StatusOr<GraphResult> Predict(const HostBatch& batch,
                                      std::vector<float>* outputs);

  int64_t output_size() const { return graph_->output_size(); }

  // The output of embedding_bag `layer` for example `b` of `batch` (its
  // fields' bags pooled one after another, [fields * dim]) into *out, as
  // the graph computes it: what an ONNX model exported with pooled inputs
  // takes in its place. `sparse_index` maps a sparse input's name to its
  // index in the batch.
  void PoolEmbeddings(const LayerDef& layer,
                      const absl::flat_hash_map<std::string, int>& sparse_index,
                      const HostBatch& batch, int64_t b,
                      std::vector<float>* out) const;

 private:
  struct Table {
    int64_t dim = 0;
    int64_t vocab = 0;                           // 0: growing
    int64_t zero_row = 0;                        // the row past the last: zeros
    const std::vector<float>* values = nullptr;  // the rows held
    absl::flat_hash_map<int64_t, int64_t> rows;  // growing: id -> row
  };

  Predictor() = default;

  std::unique_ptr<Graph> graph_;
  std::vector<Table> tables_;
  absl::flat_hash_map<std::string, int> table_index_;  // by table name
  // Per call, reused.
  std::vector<int64_t> ids_, mapped_;
  std::vector<std::vector<int64_t>> unique_, positions_;
  std::vector<std::vector<float>> rows_;
};

}  // namespace tessera

#endif  // TESSERA_TOOLS_PREDICT_PREDICTOR_H_
