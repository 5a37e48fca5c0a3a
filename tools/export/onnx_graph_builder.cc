#include "tools/export/onnx_graph_builder.h"

#include "absl/strings/str_cat.h"

namespace tessera {

std::string OnnxGraphBuilder::Floats(const std::string& name,
                                     std::vector<int64_t> dims,
                                     absl::Span<const float> values) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  // raw_data: packed little-endian, as every reader expects, and far
  // smaller to parse than repeated float_data for large tables.
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()),
                              values.size() * sizeof(float)));
  return name;
}

std::string OnnxGraphBuilder::Int64s(const std::string& name,
                                     std::vector<int64_t> dims,
                                     absl::Span<const int64_t> values) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()),
                              values.size() * sizeof(int64_t)));
  return name;
}

std::string OnnxGraphBuilder::Int64Vector(const std::string& hint,
                                          absl::Span<const int64_t> values) {
  return Int64s(Fresh(hint), {static_cast<int64_t>(values.size())}, values);
}

std::string OnnxGraphBuilder::FloatScalar(const std::string& hint,
                                          float value) {
  return Floats(Fresh(hint), {}, absl::MakeConstSpan(&value, 1));
}

onnx::NodeProto* OnnxGraphBuilder::Node(const std::string& op,
                                        const std::vector<std::string>& inputs,
                                        const std::string& output,
                                        const std::string& domain) {
  onnx::NodeProto* node = NodeN(op, inputs, {output});
  if (!domain.empty()) node->set_domain(domain);
  return node;
}

onnx::NodeProto* OnnxGraphBuilder::NodeN(
    const std::string& op, const std::vector<std::string>& inputs,
    const std::vector<std::string>& outputs) {
  onnx::NodeProto* node = graph_->add_node();
  node->set_op_type(op);
  node->set_name(absl::StrCat(outputs[0], "/", op, "_", next_++));
  for (const std::string& in : inputs) node->add_input(in);
  for (const std::string& out : outputs) node->add_output(out);
  return node;
}

void OnnxGraphBuilder::ValueInfo(onnx::ValueInfoProto* info,
                                 const std::string& name, int elem_type,
                                 const std::vector<int64_t>& dims,
                                 const std::vector<std::string>& symbols) {
  info->set_name(name);
  onnx::TypeProto::Tensor* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  onnx::TensorShapeProto* shape = tensor->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    onnx::TensorShapeProto::Dimension* dim = shape->add_dim();
    if (dims[i] > 0) {
      dim->set_dim_value(dims[i]);
    } else if (i < symbols.size() && !symbols[i].empty()) {
      dim->set_dim_param(symbols[i]);
    } else {
      dim->set_dim_param("batch");
    }
  }
}

void OnnxGraphBuilder::Input(const std::string& name, int elem_type,
                             const std::vector<int64_t>& dims,
                             const std::vector<std::string>& symbols) {
  ValueInfo(graph_->add_input(), name, elem_type, dims, symbols);
}

void OnnxGraphBuilder::Output(const std::string& name, int elem_type,
                              const std::vector<int64_t>& dims) {
  ValueInfo(graph_->add_output(), name, elem_type, dims, {});
}

std::string OnnxGraphBuilder::Fresh(const std::string& hint) {
  return absl::StrCat(hint, ":", next_++);
}

void OnnxGraphBuilder::SetInt(onnx::NodeProto* node, const std::string& name,
                              int64_t value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void OnnxGraphBuilder::SetFloat(onnx::NodeProto* node, const std::string& name,
                                float value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

void OnnxGraphBuilder::SetInts(onnx::NodeProto* node, const std::string& name,
                               absl::Span<const int64_t> values) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

}  // namespace tessera
