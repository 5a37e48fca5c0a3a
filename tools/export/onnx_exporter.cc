#include "tools/export/onnx_exporter.h"

#include "absl/strings/str_cat.h"

namespace tessera {
namespace onnx_internal {

absl::Status Exporter::Run() {
  if (absl::Status s = Inputs(); !s.ok()) return s;
  const ModelDef& def = m_.graph.resolved;
  for (int index : m_.graph.order) {
    const LayerDef& layer = def.layers(index);
    if (absl::Status s = Layer(layer); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("layer '", layer.name(), "' (",
                                 LayerKindName(layer), "): ", s.message()));
    }
  }
  return Outputs();
}

std::string Exporter::OutputOf(const LayerDef& layer) {
  return layer.output().empty() ? layer.name() : layer.output();
}

const Shape& Exporter::ShapeOf(const std::string& tensor) const {
  return m_.graph.tensors.at(tensor).shape;
}

int64_t Exporter::SizeOf(const std::string& tensor) const {
  return NumElements(ShapeOf(tensor));
}

absl::StatusOr<std::string> Exporter::Flat(const std::string& tensor) const {
  auto it = flat_.find(tensor);
  if (it == flat_.end()) {
    return absl::InternalError(
        absl::StrCat("tensor '", tensor, "' has no ONNX value"));
  }
  return it->second;
}

absl::StatusOr<std::vector<std::string>> Exporter::FlatInputs(
    const LayerDef& layer) {
  std::vector<std::string> out;
  for (const std::string& in : layer.inputs()) {
    absl::StatusOr<std::string> f = Flat(in);
    if (!f.ok()) return f.status();
    out.push_back(*f);
  }
  return out;
}

absl::StatusOr<const TrainedVariable*> Exporter::Var(
    const std::string& name) const {
  const TrainedVariable* v = m_.Find(name);
  if (v == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("the checkpoint has no variable '", name, "'"));
  }
  return v;
}

absl::StatusOr<std::string> Exporter::Weight(const std::string& name) {
  absl::StatusOr<const TrainedVariable*> v = Var(name);
  if (!v.ok()) return v.status();
  if (!initialized_.insert(name).second) return name;
  return b_.Floats(name, (*v)->shape, (*v)->values);
}

std::string Exporter::Reshape(const std::string& x, std::vector<int64_t> dims,
                              const std::string& hint) {
  const std::string out = b_.Fresh(hint);
  b_.Node("Reshape", {x, b_.Int64Vector(hint + "/shape", dims)}, out);
  return out;
}

std::string Exporter::Transpose(const std::string& x, std::vector<int64_t> perm,
                                const std::string& hint) {
  const std::string out = b_.Fresh(hint);
  OnnxGraphBuilder::SetInts(b_.Node("Transpose", {x}, out), "perm", perm);
  return out;
}

std::string Exporter::Concat(const std::vector<std::string>& xs, int64_t axis,
                             const std::string& hint) {
  if (xs.size() == 1) return xs[0];
  const std::string out = b_.Fresh(hint);
  OnnxGraphBuilder::SetInt(b_.Node("Concat", xs, out), "axis", axis);
  return out;
}

void Exporter::Activate(const std::string& x, Activation activation,
                        int64_t cols, int64_t size, const std::string& out) {
  switch (activation) {
    case RELU:
      b_.Node("Relu", {x}, out);
      break;
    case SIGMOID:
      b_.Node("Sigmoid", {x}, out);
      break;
    case TANH:
      b_.Node("Tanh", {x}, out);
      break;
    case SOFTMAX: {
      if (cols == size) {
        OnnxGraphBuilder::SetInt(b_.Node("Softmax", {x}, out), "axis", -1);
        break;
      }
      const std::string rows = Reshape(x, {-1, cols}, out + "/rows");
      const std::string soft = b_.Fresh(out + "/softmax");
      OnnxGraphBuilder::SetInt(b_.Node("Softmax", {rows}, soft), "axis", -1);
      b_.Node("Reshape", {soft, b_.Int64Vector(out + "/shape", {-1, size})},
              out);
      break;
    }
    default:
      flat_[out] = x;
      return;
  }
  flat_[out] = out;
}

absl::Status Exporter::Inputs() {
  for (const InputDef& in : m_.graph.resolved.inputs()) {
    if (in.has_dense()) {
      std::vector<int64_t> dims = {0};
      for (int64_t d : in.dense().shape()) dims.push_back(d);
      b_.Input(in.name(), onnx::TensorProto::FLOAT, dims);
      if (dims.size() == 2) {
        flat_[in.name()] = in.name();
      } else {
        const std::string flat = b_.Fresh(in.name() + "/flat");
        OnnxGraphBuilder::SetInt(b_.Node("Flatten", {in.name()}, flat), "axis",
                                 1);
        flat_[in.name()] = flat;
      }
    } else {
      // No ONNX input of its own: each embedding_bag layer reading it
      // takes its fields' ids as one input (EmbeddingBag).
      sparse_[in.name()] = in.sparse().max_hotness();
    }
  }
  return absl::OkStatus();
}

absl::Status Exporter::Outputs() {
  const LossDef& loss = m_.graph.resolved.loss();
  absl::StatusOr<std::string> logits = Flat(loss.input());
  if (!logits.ok()) return logits.status();
  const int64_t width = SizeOf(loss.input());
  switch (loss.kind()) {
    case LossDef::SOFTMAX_CROSS_ENTROPY: {
      OnnxGraphBuilder::SetInt(b_.Node("Softmax", {*logits}, "probabilities"),
                               "axis", 1);
      onnx::NodeProto* argmax = b_.Node("ArgMax", {"probabilities"}, "class");
      OnnxGraphBuilder::SetInt(argmax, "axis", 1);
      OnnxGraphBuilder::SetInt(argmax, "keepdims", 0);
      b_.Output("probabilities", onnx::TensorProto::FLOAT, {0, width});
      b_.Output("class", onnx::TensorProto::INT64, {0});
      break;
    }
    case LossDef::SIGMOID_CROSS_ENTROPY: {
      b_.Node("Sigmoid", {*logits}, "probabilities");
      // Training counts a logit >= 0 as class 1.
      const std::string positive = b_.Fresh("class/positive");
      b_.Node("GreaterOrEqual", {*logits, b_.FloatScalar("class/zero", 0.0f)},
              positive);
      const std::string cast = b_.Fresh("class/cast");
      OnnxGraphBuilder::SetInt(b_.Node("Cast", {positive}, cast), "to",
                               onnx::TensorProto::INT64);
      b_.Node("Reshape", {cast, b_.Int64Vector("class/shape", {-1})}, "class");
      b_.Output("probabilities", onnx::TensorProto::FLOAT, {0, width});
      if (width == 1) b_.Output("class", onnx::TensorProto::INT64, {0});
      break;
    }
    default:
      b_.Node("Identity", {*logits}, "predictions");
      b_.Output("predictions", onnx::TensorProto::FLOAT, {0, width});
      break;
  }
  for (const std::string& name : m_.graph.resolved.outputs()) {
    if (name == loss.input()) continue;
    absl::StatusOr<std::string> value = Flat(name);
    if (!value.ok()) return value.status();
    if (*value != name) b_.Node("Identity", {*value}, name);
    b_.Output(name, onnx::TensorProto::FLOAT, {0, SizeOf(name)});
  }
  return absl::OkStatus();
}

absl::Status Exporter::Layer(const LayerDef& layer) {
  const std::string out = OutputOf(layer);
  if (layer.has_embedding_bag()) return EmbeddingBag(layer, out);
  absl::StatusOr<std::vector<std::string>> in = FlatInputs(layer);
  if (!in.ok()) return in.status();
  const int64_t size = SizeOf(out);
  switch (layer.kind_case()) {
    case LayerDef::kDense:
      return Dense(layer, *in, out);
    case LayerDef::kActivation:
      Activate((*in)[0], layer.activation().activation(), ShapeOf(out).back(),
               size, out);
      return absl::OkStatus();
    case LayerDef::kDropout:  // evaluation passes it unchanged
    case LayerDef::kFlatten:  // already flat
    case LayerDef::kReshape:
      flat_[out] = (*in)[0];
      return absl::OkStatus();
    case LayerDef::kBatchNorm:
      return BatchNorm(layer, (*in)[0], out);
    case LayerDef::kLayerNorm:
      return LayerNorm(layer, (*in)[0], out);
    case LayerDef::kConv2D:
    case LayerDef::kMaxPool2D:
      return Window(layer, (*in)[0], out);
    case LayerDef::kConcat:
      return ConcatLayer(layer, *in, out);
    case LayerDef::kAdd:
    case LayerDef::kMultiply: {
      if (in->size() == 1) {
        flat_[out] = (*in)[0];
        return absl::OkStatus();
      }
      // In input order, as the layer sums: ((a + b) + c).
      const char* op = layer.has_add() ? "Add" : "Mul";
      std::string acc = (*in)[0];
      for (size_t i = 1; i < in->size(); ++i) {
        const std::string next =
            i + 1 == in->size() ? out : b_.Fresh(out + "/partial");
        b_.Node(op, {acc, (*in)[i]}, next);
        acc = next;
      }
      flat_[out] = out;
      return absl::OkStatus();
    }
    case LayerDef::kDotInteraction:
      return DotInteraction(layer, *in, out);
    case LayerDef::kCross:
      return Cross(layer, (*in)[0], out);
    case LayerDef::kFmOrder2:
      return FmOrder2(layer, *in, out);
    default:
      return absl::UnimplementedError("this layer kind has no ONNX export yet");
  }
}

onnx::TensorProto* Exporter::graph_initializer(const std::string& name) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  return t;
}

}  // namespace onnx_internal
}  // namespace tessera
