#ifndef TESSERA_WORKER_NN_GRAPH_H_
#define TESSERA_WORKER_NN_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model/model_graph.h"
#include "worker/backend/backend.h"
#include "worker/nn/layer.h"

namespace tessera {

// A batch in host memory.
//
// Embedding tables are too big to hold, so a batch brings the rows of each
// table that it uses: the caller collects, per table, the ids of every
// sparse input the table reads (Graph::table_reads order, each input's ids
// in example order), maps them to distinct rows (LocalizeTableIds, as
// RowExchange does), pulls those rows and passes, per id, the position of
// its row.
struct GraphBatch {
  int64_t size = 0;
  // One array per dense input of the model, in the description's order,
  // each size * (the input's elements) floats.
  std::vector<absl::Span<const float>> dense;
  // One per sparse input, in the description's order: example b's ids are
  // entries [offsets[b], offsets[b + 1]) of the input's ids.
  std::vector<absl::Span<const int64_t>> sparse_offsets;
  // Per table (tables() order): its rows this batch uses, [rows, dim], and
  // for each id of each of table_reads(t) in turn the index of its row.
  std::vector<absl::Span<const float>> table_rows;
  std::vector<absl::Span<const int64_t>> table_positions;
  absl::Span<const int32_t> class_labels;  // label kind CLASS_INDEX
  absl::Span<const float> labels;          // label kinds BINARY and REAL
};

// The gradient of one table's rows of a batch: the distinct row indices
// (into GraphBatch::table_rows) that got one, ascending, and per index the
// gradient summed over the row's occurrences.
struct TableGradient {
  std::vector<int64_t> rows;
  std::vector<float> values;  // [rows.size(), dim]
};

struct GraphResult {
  double loss_sum = 0;  // summed over the batch
  int64_t correct = 0;  // predictions that matched the label
  int64_t examples = 0;
};

// A model description run on one backend: the layers in graph order, an
// activation and a gradient buffer per tensor, the loss. Any description
// whose layers the library runs trains through the same two calls.
//
// Thread safety: one call at a time (it owns activation buffers).
class Graph {
 public:
  // `backend` must outlive the graph. Unimplemented names a layer kind the
  // library does not run yet.
  static absl::StatusOr<std::unique_ptr<Graph>> Create(const ModelGraph& model,
                                                       Backend* backend);

  // The variables held whole (dense layers, norms), in the model's
  // variable order, and the embedding tables, pulled by rows.
  const std::vector<VariableDef>& dense_variables() const { return variables_; }
  const std::vector<VariableDef>& tables() const { return tables_; }
  // The sparse inputs (indices among the description's sparse inputs) that
  // table t reads, one entry per embedding_bag layer reading it.
  const std::vector<int>& table_reads(int t) const { return table_reads_[t]; }

  // Copies every dense variable's value (dense_variables() order, exact
  // sizes) to the device; InvalidArgument names a variable of the wrong
  // size and copies nothing.
  absl::Status SetParameters(absl::Span<const absl::Span<const float>> values);

  // The dense variables' value and gradient buffers on the device, as
  // spans, where the device is the host (Backend::device_is_host); empty
  // otherwise. A caller may pull values straight into them (SetParameters
  // of these spans copies nothing) and push the gradients TrainStep
  // leaves there, between steps.
  std::vector<absl::Span<float>> HostVisibleValues();
  std::vector<absl::Span<float>> HostVisibleGradients();

  // Parameters copied to the device while a step computes (Backend's
  // uploads: on a GPU, a copy stream beside the kernels). PrepareStaging
  // makes a second set of device buffers. StageParameters, the one call
  // another thread may make while this graph runs steps (the prefetching
  // thread, between UseStagedParameters or DiscardStagedParameters and
  // the next of them), uploads `values` (checked as SetParameters does;
  // memory from the backend's AllocateHost, unchanged until the staged set
  // is used or discarded and a step has ended) into that set; steps still
  // run with the current parameters. UseStagedParameters, on this graph's
  // thread, makes the staged set the parameters of the steps after it,
  // without the host waiting for the uploads; DiscardStagedParameters
  // drops a staged set that will not be used.
  absl::Status PrepareStaging();
  absl::Status StageParameters(
      absl::Span<const absl::Span<const float>> values);
  void UseStagedParameters();
  void DiscardStagedParameters();

  // Forward and backward with dropout drawn from `seed`; writes the
  // gradient of the batch's mean loss of every dense variable into `grads`
  // (host memory, dense_variables() order, exact sizes) and of every
  // table's rows into (*table_grads)[t]. A variable with an update rule of
  // its own (BatchNorm's moving statistics) gets the value to fold in
  // instead. InvalidArgument names a wrong input size, an id position
  // outside its table's rows or a label out of range before anything runs.
  absl::StatusOr<GraphResult> TrainStep(
      const GraphBatch& batch, uint64_t seed,
      absl::Span<const absl::Span<float>> grads,
      std::vector<TableGradient>* table_grads = nullptr);

  // The number of floats of all dense variables' gradients together.
  int64_t dense_gradient_size() const;

  // As TrainStep, but the dense gradients stay on the device: `scale`
  // times each variable's gradient is written to `device_grads` (device
  // memory of the graph's backend, dense_gradient_size() floats), packed
  // in dense_variables() order. Returns once that work is queued, without
  // waiting for it (the loss is known before the backward pass), so a
  // collective ordered after the backend's stream (native_stream()) can
  // follow at once; the backend's first error so far is returned. For
  // models without embedding tables (InvalidArgument otherwise), whose
  // every gradient is dense: mirrored training.
  absl::StatusOr<GraphResult> TrainStepOnDevice(const GraphBatch& batch,
                                                uint64_t seed, float scale,
                                                float* device_grads);

  // Forward only, without dropout. If `predictions` is not null it gets
  // the loss head's output per example: the probability of a sigmoid
  // head, the softmax of a softmax head, the value of a regression.
  absl::StatusOr<GraphResult> Evaluate(
      const GraphBatch& batch, std::vector<float>* predictions = nullptr);

  // Values per example of the loss head's output.
  int64_t output_size() const { return tensors_[loss_input_].size; }

 private:
  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<int> inputs;  // tensor indices
    int output = 0;
    // Per input: where the layer writes its gradient (the tensor's own
    // buffer when the tensor has one reader, else a buffer of this slot
    // that is added in); -1 for a model input, which needs none.
    std::vector<int> slot;
    std::vector<int> params;  // indices into variables_
  };
  struct Tensor {
    int64_t size = 0;  // elements per example
    bool model_input = false;
    int readers = 0;
    DeviceArray<float> value, grad;
  };

  // An embedding_bag layer: it reads a sparse input and a table, which
  // the graph holds per step, so it runs outside the Layer interface.
  // One field of an embedding_bag layer: a layer of n fields writes each
  // field's rows into its column of the [n, dim] output.
  struct Embedding {
    int input = 0;  // sparse input index
    int table = 0;
    int output = 0;  // tensor index
    int64_t dim = 0;
    int64_t column = 0;  // offset of the field in an example's output
    int64_t stride = 0;  // floats per example in the output: n * dim
    Backend::Combiner combiner = Backend::Combiner::kSum;
    int64_t start = 0;  // this step: its first id among the table's
  };
  struct TableBuffers {
    int64_t dim = 0;
    int64_t rows_capacity = 0, ids_capacity = 0;
    int64_t ids = 0;  // this step's ids over all reads
    DeviceArray<float> values, drows, summed;
    DeviceArray<int64_t> positions, unique;
  };

  explicit Graph(Backend* backend) : backend_(backend) {}
  // Create's steps. Names holds where each variable, table, tensor and
  // sparse input went, by name, while the graph is built.
  struct Names;
  void AddVariables(const ModelGraph& model, Names* names);
  void AddTensor(const ModelGraph& model, const std::string& name, bool input,
                 Names* names);
  void AddInputs(const ModelGraph& model, Names* names);
  // An embedding bag's reads: one per field, pooled by ForwardEmbeddings.
  void AddEmbeddingBag(const LayerDef& def, const Names& names);
  absl::Status AddLayer(const ModelGraph& model, const LayerDef& def,
                        int* dropouts, Names* names);
  void AssignGradientSlots();
  // InvalidArgument unless `values` has one span of the right size per
  // dense variable.
  absl::Status CheckParameters(
      absl::Span<const absl::Span<const float>> values) const;
  absl::Status CheckBatch(const GraphBatch& batch) const;
  absl::Status CheckSparse(const GraphBatch& batch) const;
  void ForwardEmbeddings(const GraphBatch& batch);
  void Reserve(int64_t batch);
  void Forward(const GraphBatch& batch, bool training, uint64_t seed);
  // The forward and backward pass of a checked batch: the dense gradients
  // in grads_, the tables' on the host in *table_grads (with tables).
  GraphResult ForwardBackward(const GraphBatch& batch, uint64_t seed,
                              std::vector<TableGradient>* table_grads);
  double Loss(const GraphBatch& batch, bool gradient, int64_t* correct);

  Backend* const backend_;
  ModelDef model_;
  std::vector<VariableDef> variables_;
  std::vector<DeviceArray<float>> values_, grads_;
  std::vector<DeviceArray<float>> staged_;  // PrepareStaging; else empty
  std::vector<Tensor> tensors_;
  std::vector<DeviceArray<float>> slots_;  // per fan-out gradient slot
  std::vector<int64_t> slot_sizes_;
  std::vector<Node> nodes_;
  std::vector<int> dense_inputs_;  // tensor index per dense model input
  std::vector<std::string> dense_names_, sparse_names_;
  std::vector<VariableDef> tables_;
  std::vector<std::vector<int>> table_reads_;
  std::vector<Embedding> embeddings_;
  std::vector<TableBuffers> table_buffers_;
  std::vector<DeviceArray<int64_t>> sparse_;  // offsets per sparse input
  int loss_input_ = 0;
  int64_t capacity_ = 0;
  DeviceArray<int32_t> class_labels_;
  DeviceArray<float> labels_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_NN_GRAPH_H_
