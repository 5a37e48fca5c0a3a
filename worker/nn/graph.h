#ifndef TESSERA_WORKER_NN_GRAPH_H_
#define TESSERA_WORKER_NN_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model/model_graph.h"
#include "worker/backend.h"
#include "worker/nn/layer.h"

namespace tessera {

// A batch in host memory.
struct GraphBatch {
  int64_t size = 0;
  // One array per dense input of the model, in the description's order,
  // each size * (the input's elements) floats.
  std::vector<absl::Span<const float>> dense;
  absl::Span<const int32_t> class_labels;  // label kind CLASS_INDEX
  absl::Span<const float> labels;          // label kinds BINARY and REAL
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

  const std::vector<VariableDef>& variables() const { return variables_; }

  // Copies every variable's value (variables() order, exact sizes) to the
  // device; InvalidArgument names a variable of the wrong size and copies
  // nothing.
  absl::Status SetParameters(absl::Span<const absl::Span<const float>> values);

  // Forward and backward with dropout drawn from `seed`; writes the
  // gradient of the batch's mean loss of every variable into `grads`
  // (host memory, variables() order, exact sizes). InvalidArgument names
  // a wrong input size or a label out of range before anything runs.
  absl::StatusOr<GraphResult> TrainStep(
      const GraphBatch& batch, uint64_t seed,
      absl::Span<const absl::Span<float>> grads);

  // Forward only, without dropout.
  absl::StatusOr<GraphResult> Evaluate(const GraphBatch& batch);

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

  explicit Graph(Backend* backend) : backend_(backend) {}
  absl::Status CheckBatch(const GraphBatch& batch) const;
  void Reserve(int64_t batch);
  void Forward(const GraphBatch& batch, bool training, uint64_t seed);
  double Loss(const GraphBatch& batch, bool gradient, int64_t* correct);

  Backend* const backend_;
  ModelDef model_;
  std::vector<VariableDef> variables_;
  std::vector<DeviceArray<float>> values_, grads_;
  std::vector<Tensor> tensors_;
  std::vector<DeviceArray<float>> slots_;  // per fan-out gradient slot
  std::vector<int64_t> slot_sizes_;
  std::vector<Node> nodes_;
  std::vector<int> dense_inputs_;  // tensor index per dense model input
  int loss_input_ = 0;
  int64_t capacity_ = 0;
  DeviceArray<int32_t> class_labels_;
  DeviceArray<float> labels_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_NN_GRAPH_H_
