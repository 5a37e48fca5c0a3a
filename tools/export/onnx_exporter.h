// Internal to the ONNX export (tools/export/onnx_export.h): the class that
// writes a trained model's graph, one layer at a time. Its parts:
// onnx_exporter.cc (inputs, outputs, the common steps), onnx_layer_export.cc
// (each layer kind but embedding bags), onnx_embedding_export.cc (tables
// and bags). Not for use elsewhere.
#ifndef TESSERA_TOOLS_EXPORT_ONNX_EXPORTER_H_
#define TESSERA_TOOLS_EXPORT_ONNX_EXPORTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/layer_kinds.h"
#include "onnx/onnx_pb.h"
#include "tools/export/onnx_export.h"
#include "tools/export/onnx_graph_builder.h"
#include "tools/export/trained_model.h"

namespace tessera {
namespace onnx_internal {

// Every Tessera tensor travels through the ONNX graph flattened to
// [batch, elements per example], the layout the layer library keeps it in;
// a layer that needs structure (images, stacked feature vectors) reshapes
// its own inputs and flattens its output, so layers compose as they do in
// training.
//
// Thread safety: one Run, once.
class Exporter {
 public:
  Exporter(const TrainedModel& model, const OnnxExportOptions& options,
           onnx::GraphProto* graph)
      : m_(model), options_(options), b_(graph), graph_(graph) {}

  // Writes the graph: inputs, every layer in graph order, outputs. Errors
  // name the layer.
  absl::Status Run();

  bool used_ml() const { return used_ml_; }

 private:
  static std::string OutputOf(const LayerDef& layer);

  const Shape& ShapeOf(const std::string& tensor) const;
  int64_t SizeOf(const std::string& tensor) const;

  absl::StatusOr<std::string> Flat(const std::string& tensor) const;

  absl::StatusOr<std::vector<std::string>> FlatInputs(const LayerDef& layer);

  absl::StatusOr<const TrainedVariable*> Var(const std::string& name) const;

  // The variable as an initializer of its own shape (added once).
  absl::StatusOr<std::string> Weight(const std::string& name);

  std::string Reshape(const std::string& x, std::vector<int64_t> dims,
                      const std::string& hint);

  std::string Transpose(const std::string& x, std::vector<int64_t> perm,
                        const std::string& hint);

  std::string Concat(const std::vector<std::string>& xs, int64_t axis,
                     const std::string& hint);

  // Writes activation(x) of rows of `cols` values as tensor `out`.
  void Activate(const std::string& x, Activation activation, int64_t cols,
                int64_t size, const std::string& out);

  absl::Status Inputs();

  absl::Status Outputs();

  absl::Status Layer(const LayerDef& layer);

  absl::Status Dense(const LayerDef& layer, const std::vector<std::string>& in,
                     const std::string& out);

  absl::Status BatchNorm(const LayerDef& layer, const std::string& x,
                         const std::string& out);

  absl::Status LayerNorm(const LayerDef& layer, const std::string& x,
                         const std::string& out);

  // Conv2D and MaxPool2D: NHWC in Tessera, NCHW in ONNX.
  absl::Status Window(const LayerDef& layer, const std::string& x,
                      const std::string& out);

  absl::Status ConcatLayer(const LayerDef& layer,
                           const std::vector<std::string>& in,
                           const std::string& out);

  // The feature vectors of `in`, [batch, count, dim].
  std::string Stack(const LayerDef& layer, const std::vector<std::string>& in,
                    const std::string& out, int64_t* count, int64_t* dim);

  absl::Status DotInteraction(const LayerDef& layer,
                              const std::vector<std::string>& in,
                              const std::string& out);

  absl::Status Cross(const LayerDef& layer, const std::string& x0,
                     const std::string& out);

  absl::Status FmOrder2(const LayerDef& layer,
                        const std::vector<std::string>& in,
                        const std::string& out);

  // A table as an initializer [rows + 1, dim] whose last row is zeros: the
  // row of padding and of ids the table does not hold.
  absl::StatusOr<std::string> TableValues(const TrainedVariable& v);

  // The row of each id of `ids` (int64, any shape) in TableValues(v).
  std::string RowsOf(const TrainedVariable& v, const std::string& ids,
                     const std::string& hint);

  // The name of embedding_bag `layer`'s id input: "<its output>_ids".
  static std::string IdsInputName(const LayerDef& layer);

  // Adds embedding_bag `layer`'s id input; returns its name.
  absl::StatusOr<std::string> AddIdsInput(const LayerDef& layer);

  // `sum` [batch, n, dim] divided by each bag's count of ids that are not
  // padding; returns the quotient's name.
  std::string MeanOverIds(const std::string& ids, const std::string& sum,
                          const std::string& axes, const std::string& out);

  absl::Status EmbeddingBag(const LayerDef& layer, const std::string& out);

  onnx::TensorProto* graph_initializer(const std::string& name);

  const TrainedModel& m_;
  const OnnxExportOptions options_;
  OnnxGraphBuilder b_;
  onnx::GraphProto* const graph_;
  absl::flat_hash_map<std::string, std::string> flat_;
  absl::flat_hash_map<std::string, int64_t> sparse_;  // -> max_hotness
  absl::flat_hash_set<std::string> initialized_;
  bool used_ml_ = false;
};

}  // namespace onnx_internal
}  // namespace tessera

#endif  // TESSERA_TOOLS_EXPORT_ONNX_EXPORTER_H_
