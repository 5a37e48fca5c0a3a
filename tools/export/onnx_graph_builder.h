// A small helper for writing an ONNX graph node by node through the
// protobuf classes of the onnx library (Debian's libonnx-dev): constants
// become initializers, every node gets a unique name, attributes are set
// by type.
#ifndef TESSERA_TOOLS_EXPORT_ONNX_GRAPH_BUILDER_H_
#define TESSERA_TOOLS_EXPORT_ONNX_GRAPH_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "onnx/onnx_pb.h"

namespace tessera {

// Thread safety: one thread at a time.
class OnnxGraphBuilder {
 public:
  explicit OnnxGraphBuilder(onnx::GraphProto* graph) : graph_(graph) {}

  // Initializers; each returns its name.
  std::string Floats(const std::string& name, std::vector<int64_t> dims,
                     absl::Span<const float> values);
  std::string Int64s(const std::string& name, std::vector<int64_t> dims,
                     absl::Span<const int64_t> values);
  // An int64 vector [values.size()] (shapes, axes, indices), named after
  // `hint`.
  std::string Int64Vector(const std::string& hint,
                          absl::Span<const int64_t> values);
  std::string FloatScalar(const std::string& hint, float value);

  // Adds a node with one output named `output` and returns the node, for
  // attributes.
  onnx::NodeProto* Node(const std::string& op,
                        const std::vector<std::string>& inputs,
                        const std::string& output,
                        const std::string& domain = "");
  // As Node, with several outputs.
  onnx::NodeProto* NodeN(const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs);

  // Graph inputs and outputs; a dimension <= 0 is symbolic, named
  // `symbols[i]` when given, else "batch".
  void Input(const std::string& name, int elem_type,
             const std::vector<int64_t>& dims,
             const std::vector<std::string>& symbols = {});
  void Output(const std::string& name, int elem_type,
              const std::vector<int64_t>& dims);

  // A fresh tensor name based on `hint`.
  std::string Fresh(const std::string& hint);

  static void SetInt(onnx::NodeProto* node, const std::string& name,
                     int64_t value);
  static void SetFloat(onnx::NodeProto* node, const std::string& name,
                       float value);
  static void SetInts(onnx::NodeProto* node, const std::string& name,
                      absl::Span<const int64_t> values);

 private:
  void ValueInfo(onnx::ValueInfoProto* info, const std::string& name,
                 int elem_type, const std::vector<int64_t>& dims,
                 const std::vector<std::string>& symbols);

  onnx::GraphProto* const graph_;
  int64_t next_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_TOOLS_EXPORT_ONNX_GRAPH_BUILDER_H_
