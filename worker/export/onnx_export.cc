#include "worker/export/onnx_export.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/model/layer_kinds.h"
#include "worker/export/onnx_graph_builder.h"

namespace tessera {
namespace {

// The id that pads a bag in the ONNX model's sparse inputs.
constexpr int64_t kPaddingId = -1;

// Every Tessera tensor travels through the ONNX graph flattened to
// [batch, elements per example], the layout the layer library keeps it in;
// a layer that needs structure (images, stacked feature vectors) reshapes
// its own inputs and flattens its output, so layers compose as they do in
// training.
class Exporter {
 public:
  Exporter(const TrainedModel& model, const OnnxExportOptions& options,
           onnx::GraphProto* graph)
      : m_(model), options_(options), b_(graph), graph_(graph) {}

  absl::Status Run() {
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

  bool used_ml() const { return used_ml_; }

 private:
  static std::string OutputOf(const LayerDef& layer) {
    return layer.output().empty() ? layer.name() : layer.output();
  }

  const Shape& ShapeOf(const std::string& tensor) const {
    return m_.graph.tensors.at(tensor).shape;
  }
  int64_t SizeOf(const std::string& tensor) const {
    return NumElements(ShapeOf(tensor));
  }

  absl::StatusOr<std::string> Flat(const std::string& tensor) const {
    auto it = flat_.find(tensor);
    if (it == flat_.end()) {
      return absl::InternalError(
          absl::StrCat("tensor '", tensor, "' has no ONNX value"));
    }
    return it->second;
  }

  absl::StatusOr<std::vector<std::string>> FlatInputs(const LayerDef& layer) {
    std::vector<std::string> out;
    for (const std::string& in : layer.inputs()) {
      absl::StatusOr<std::string> f = Flat(in);
      if (!f.ok()) return f.status();
      out.push_back(*f);
    }
    return out;
  }

  absl::StatusOr<const TrainedVariable*> Var(const std::string& name) const {
    const TrainedVariable* v = m_.Find(name);
    if (v == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("the checkpoint has no variable '", name, "'"));
    }
    return v;
  }

  // The variable as an initializer of its own shape (added once).
  absl::StatusOr<std::string> Weight(const std::string& name) {
    absl::StatusOr<const TrainedVariable*> v = Var(name);
    if (!v.ok()) return v.status();
    if (!initialized_.insert(name).second) return name;
    return b_.Floats(name, (*v)->shape, (*v)->values);
  }

  std::string Reshape(const std::string& x, std::vector<int64_t> dims,
                      const std::string& hint) {
    const std::string out = b_.Fresh(hint);
    b_.Node("Reshape", {x, b_.Int64Vector(hint + "/shape", dims)}, out);
    return out;
  }

  std::string Transpose(const std::string& x, std::vector<int64_t> perm,
                        const std::string& hint) {
    const std::string out = b_.Fresh(hint);
    OnnxGraphBuilder::SetInts(b_.Node("Transpose", {x}, out), "perm", perm);
    return out;
  }

  std::string Concat(const std::vector<std::string>& xs, int64_t axis,
                     const std::string& hint) {
    if (xs.size() == 1) return xs[0];
    const std::string out = b_.Fresh(hint);
    OnnxGraphBuilder::SetInt(b_.Node("Concat", xs, out), "axis", axis);
    return out;
  }

  // Writes activation(x) of rows of `cols` values as tensor `out`.
  void Activate(const std::string& x, Activation activation, int64_t cols,
                int64_t size, const std::string& out) {
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

  absl::Status Inputs() {
    for (const InputDef& in : m_.graph.resolved.inputs()) {
      if (in.has_dense()) {
        std::vector<int64_t> dims = {0};
        for (int64_t d : in.dense().shape()) dims.push_back(d);
        b_.Input(in.name(), onnx::TensorProto::FLOAT, dims);
        if (dims.size() == 2) {
          flat_[in.name()] = in.name();
        } else {
          const std::string flat = b_.Fresh(in.name() + "/flat");
          OnnxGraphBuilder::SetInt(b_.Node("Flatten", {in.name()}, flat),
                                   "axis", 1);
          flat_[in.name()] = flat;
        }
      } else if (!options_.pooled_inputs) {
        // The bag's width is free: max_hotness is what the description
        // expects, but the data decides (training takes bags of any size).
        b_.Input(in.name(), onnx::TensorProto::INT64, {0, 0},
                 {"batch", in.name() + "_ids"});
        sparse_.insert(in.name());
      }
    }
    return absl::OkStatus();
  }

  absl::Status Outputs() {
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
        b_.Node("Reshape", {cast, b_.Int64Vector("class/shape", {-1})},
                "class");
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

  absl::Status Layer(const LayerDef& layer) {
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
        return absl::UnimplementedError(
            "this layer kind has no ONNX export yet");
    }
  }

  absl::Status Dense(const LayerDef& layer, const std::vector<std::string>& in,
                     const std::string& out) {
    const DenseLayer& p = layer.dense();
    const std::string x = Concat(in, 1, out + "/inputs");
    absl::StatusOr<std::string> kernel =
        Weight(absl::StrCat(layer.name(), "/kernel"));
    if (!kernel.ok()) return kernel.status();
    const bool bias = !p.has_use_bias() || p.use_bias();
    const std::string z =
        p.activation() == LINEAR ? out : b_.Fresh(out + "/linear");
    if (bias) {
      absl::StatusOr<std::string> b =
          Weight(absl::StrCat(layer.name(), "/bias"));
      if (!b.ok()) return b.status();
      b_.Node("Gemm", {x, *kernel, *b}, z);
    } else {
      b_.Node("MatMul", {x, *kernel}, z);
    }
    flat_[out] = z;
    if (p.activation() != LINEAR) {
      Activate(z, p.activation(), p.units(), p.units(), out);
    }
    return absl::OkStatus();
  }

  absl::Status BatchNorm(const LayerDef& layer, const std::string& x,
                         const std::string& out) {
    const int64_t c = ShapeOf(out).back();
    std::vector<std::string> args = {Reshape(x, {-1, c}, out + "/rows")};
    for (const char* v : {"gamma", "beta", "moving_mean", "moving_variance"}) {
      absl::StatusOr<std::string> w =
          Weight(absl::StrCat(layer.name(), "/", v));
      if (!w.ok()) return w.status();
      args.push_back(*w);
    }
    const std::string y = b_.Fresh(out + "/normalized");
    OnnxGraphBuilder::SetFloat(b_.Node("BatchNormalization", args, y),
                               "epsilon", layer.batch_norm().epsilon());
    b_.Node("Reshape", {y, b_.Int64Vector(out + "/shape", {-1, SizeOf(out)})},
            out);
    flat_[out] = out;
    return absl::OkStatus();
  }

  absl::Status LayerNorm(const LayerDef& layer, const std::string& x,
                         const std::string& out) {
    const int64_t c = ShapeOf(out).back();
    std::vector<std::string> args = {Reshape(x, {-1, c}, out + "/rows")};
    for (const char* v : {"gamma", "beta"}) {
      absl::StatusOr<std::string> w =
          Weight(absl::StrCat(layer.name(), "/", v));
      if (!w.ok()) return w.status();
      args.push_back(*w);
    }
    const std::string y = b_.Fresh(out + "/normalized");
    onnx::NodeProto* node = b_.Node("LayerNormalization", args, y);
    OnnxGraphBuilder::SetInt(node, "axis", -1);
    OnnxGraphBuilder::SetFloat(node, "epsilon", layer.layer_norm().epsilon());
    b_.Node("Reshape", {y, b_.Int64Vector(out + "/shape", {-1, SizeOf(out)})},
            out);
    flat_[out] = out;
    return absl::OkStatus();
  }

  // Conv2D and MaxPool2D: NHWC in Tessera, NCHW in ONNX.
  absl::Status Window(const LayerDef& layer, const std::string& x,
                      const std::string& out) {
    const Shape& in_shape = ShapeOf(layer.inputs(0));
    const Shape& out_shape = ShapeOf(out);
    const bool conv = layer.has_conv2d();
    std::vector<int64_t> kernel, strides;
    Padding padding;
    if (conv) {
      const Conv2DLayer& p = layer.conv2d();
      kernel = {p.kernel_size(0), p.kernel_size(1)};
      strides = {p.strides(0), p.strides(1)};
      padding = p.padding();
    } else {
      const MaxPool2DLayer& p = layer.max_pool2d();
      kernel = {p.pool_size(0), p.pool_size(1)};
      strides = {p.strides(0), p.strides(1)};
      padding = p.padding();
    }
    std::vector<int64_t> begin(2), end(2);
    for (int a = 0; a < 2; ++a) {
      absl::StatusOr<WindowAxis> w =
          WindowAlong(in_shape[a], kernel[a], strides[a], padding);
      if (!w.ok()) return w.status();
      begin[a] = w->pad_before;
      end[a] = std::max<int64_t>(
          0, (w->out - 1) * strides[a] + kernel[a] - in_shape[a] - begin[a]);
    }
    const std::string nhwc =
        Reshape(x, {-1, in_shape[0], in_shape[1], in_shape[2]}, out + "/nhwc");
    const std::string nchw = Transpose(nhwc, {0, 3, 1, 2}, out + "/nchw");
    std::vector<std::string> args = {nchw};
    if (conv) {
      absl::StatusOr<const TrainedVariable*> k =
          Var(absl::StrCat(layer.name(), "/kernel"));
      if (!k.ok()) return k.status();
      // [kh, kw, c, f] -> [f, c, kh, kw].
      const int64_t kh = kernel[0], kw = kernel[1], c = in_shape[2],
                    f = out_shape[2];
      std::vector<float> w(kh * kw * c * f);
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j)
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t fi = 0; fi < f; ++fi)
              w[((fi * c + ci) * kh + i) * kw + j] =
                  (*k)->values[((i * kw + j) * c + ci) * f + fi];
      args.push_back(b_.Floats(absl::StrCat(layer.name(), "/kernel_oihw"),
                               {f, c, kh, kw}, w));
      const Conv2DLayer& p = layer.conv2d();
      if (!p.has_use_bias() || p.use_bias()) {
        absl::StatusOr<std::string> bias =
            Weight(absl::StrCat(layer.name(), "/bias"));
        if (!bias.ok()) return bias.status();
        args.push_back(*bias);
      }
    }
    const std::string y = b_.Fresh(out + (conv ? "/conv" : "/pool"));
    onnx::NodeProto* node = b_.Node(conv ? "Conv" : "MaxPool", args, y);
    OnnxGraphBuilder::SetInts(node, "kernel_shape", kernel);
    OnnxGraphBuilder::SetInts(node, "strides", strides);
    OnnxGraphBuilder::SetInts(node, "pads",
                              {begin[0], begin[1], end[0], end[1]});
    const std::string back = Transpose(y, {0, 2, 3, 1}, out + "/nhwc_out");
    const int64_t size = SizeOf(out);
    const Activation act = conv ? layer.conv2d().activation() : LINEAR;
    if (act == LINEAR) {
      b_.Node("Reshape", {back, b_.Int64Vector(out + "/shape", {-1, size})},
              out);
      flat_[out] = out;
      return absl::OkStatus();
    }
    const std::string flat = Reshape(back, {-1, size}, out + "/flat");
    Activate(flat, act, out_shape.back(), size, out);
    return absl::OkStatus();
  }

  absl::Status ConcatLayer(const LayerDef& layer,
                           const std::vector<std::string>& in,
                           const std::string& out) {
    const Shape& shape = ShapeOf(out);
    const int rank = static_cast<int>(shape.size());
    int axis = layer.concat().axis();
    if (axis < 0) axis += rank;
    int64_t outer = 1;
    for (int d = 0; d < axis; ++d) outer *= shape[d];
    if (outer == 1) {
      if (in.size() == 1) {
        flat_[out] = in[0];
        return absl::OkStatus();
      }
      OnnxGraphBuilder::SetInt(b_.Node("Concat", in, out), "axis", 1);
      flat_[out] = out;
      return absl::OkStatus();
    }
    std::vector<std::string> blocks;
    for (size_t i = 0; i < in.size(); ++i) {
      blocks.push_back(Reshape(
          in[i], {-1, outer, SizeOf(layer.inputs(i)) / outer}, out + "/block"));
    }
    const std::string joined = Concat(blocks, 2, out + "/joined");
    b_.Node("Reshape",
            {joined, b_.Int64Vector(out + "/shape", {-1, SizeOf(out)})}, out);
    flat_[out] = out;
    return absl::OkStatus();
  }

  // The feature vectors of `in`, [batch, count, dim].
  std::string Stack(const LayerDef& layer, const std::vector<std::string>& in,
                    const std::string& out, int64_t* count, int64_t* dim) {
    int64_t total = 0;
    for (const std::string& name : layer.inputs()) total += SizeOf(name);
    *dim = ShapeOf(layer.inputs(0)).back();
    *count = total / *dim;
    return Reshape(Concat(in, 1, out + "/stacked_flat"), {-1, *count, *dim},
                   out + "/stacked");
  }

  absl::Status DotInteraction(const LayerDef& layer,
                              const std::vector<std::string>& in,
                              const std::string& out) {
    const DotInteractionLayer& p = layer.dot_interaction();
    int64_t f = 0, d = 0;
    const std::string stacked = Stack(layer, in, out, &f, &d);
    const std::string t = Transpose(stacked, {0, 2, 1}, out + "/transposed");
    const std::string dots = b_.Fresh(out + "/dots");
    b_.Node("MatMul", {stacked, t}, dots);
    const std::string flat = Reshape(dots, {-1, f * f}, out + "/dots_flat");
    // The lower triangle row by row, as the layer gathers it.
    std::vector<int64_t> pairs;
    for (int64_t i = 0; i < f; ++i) {
      for (int64_t j = 0; j < (p.self_interaction() ? i + 1 : i); ++j) {
        pairs.push_back(i * f + j);
      }
    }
    const std::string gathered =
        p.concat_first_input() ? b_.Fresh(out + "/pairs") : out;
    OnnxGraphBuilder::SetInt(
        b_.Node("Gather", {flat, b_.Int64Vector(out + "/pair_index", pairs)},
                gathered),
        "axis", 1);
    if (p.concat_first_input()) {
      OnnxGraphBuilder::SetInt(b_.Node("Concat", {in[0], gathered}, out),
                               "axis", 1);
    }
    flat_[out] = out;
    return absl::OkStatus();
  }

  absl::Status Cross(const LayerDef& layer, const std::string& x0,
                     const std::string& out) {
    const CrossLayer& p = layer.cross();
    std::string xl = x0;
    for (int l = 0; l < p.num_layers(); ++l) {
      const std::string next = l + 1 == p.num_layers()
                                   ? out
                                   : b_.Fresh(absl::StrCat(out, "/x", l + 1));
      absl::StatusOr<std::string> bias =
          Weight(absl::StrCat(layer.name(), "/bias_", l));
      if (!bias.ok()) return bias.status();
      const std::string u = b_.Fresh(absl::StrCat(out, "/u", l));
      const std::string scaled = b_.Fresh(absl::StrCat(out, "/scaled", l));
      if (p.version() == CrossLayer::V1) {
        // x0 * (x_l w_l) + b_l + x_l
        absl::StatusOr<std::string> w =
            Weight(absl::StrCat(layer.name(), "/kernel_", l));
        if (!w.ok()) return w.status();
        b_.Node("MatMul", {xl, *w}, u);
        b_.Node("Mul", {x0, u}, scaled);
        const std::string biased = b_.Fresh(absl::StrCat(out, "/biased", l));
        b_.Node("Add", {scaled, *bias}, biased);
        b_.Node("Add", {xl, biased}, next);
      } else {
        // x0 * (x_l W_l + b_l) + x_l
        if (p.projection_dim() > 0) {
          absl::StatusOr<std::string> down =
              Weight(absl::StrCat(layer.name(), "/down_", l));
          if (!down.ok()) return down.status();
          absl::StatusOr<std::string> up =
              Weight(absl::StrCat(layer.name(), "/up_", l));
          if (!up.ok()) return up.status();
          const std::string h = b_.Fresh(absl::StrCat(out, "/h", l));
          b_.Node("MatMul", {xl, *down}, h);
          b_.Node("Gemm", {h, *up, *bias}, u);
        } else {
          absl::StatusOr<std::string> w =
              Weight(absl::StrCat(layer.name(), "/kernel_", l));
          if (!w.ok()) return w.status();
          b_.Node("Gemm", {xl, *w, *bias}, u);
        }
        b_.Node("Mul", {x0, u}, scaled);
        b_.Node("Add", {xl, scaled}, next);
      }
      xl = next;
    }
    flat_[out] = out;
    return absl::OkStatus();
  }

  absl::Status FmOrder2(const LayerDef& layer,
                        const std::vector<std::string>& in,
                        const std::string& out) {
    int64_t n = 0, d = 0;
    const std::string stacked = Stack(layer, in, out, &n, &d);
    // In double, as the layer computes it: (sum)^2 - sum of squares
    // cancels.
    const std::string wide = b_.Fresh(out + "/double");
    OnnxGraphBuilder::SetInt(b_.Node("Cast", {stacked}, wide), "to",
                             onnx::TensorProto::DOUBLE);
    const std::string axes = b_.Int64Vector(out + "/axes", {1});
    const std::string sum = b_.Fresh(out + "/sum");
    OnnxGraphBuilder::SetInt(b_.Node("ReduceSum", {wide, axes}, sum),
                             "keepdims", 0);
    const std::string squares = b_.Fresh(out + "/squares");
    b_.Node("Mul", {wide, wide}, squares);
    const std::string sq = b_.Fresh(out + "/sum_of_squares");
    OnnxGraphBuilder::SetInt(b_.Node("ReduceSum", {squares, axes}, sq),
                             "keepdims", 0);
    const std::string sum2 = b_.Fresh(out + "/square_of_sum");
    b_.Node("Mul", {sum, sum}, sum2);
    const std::string diff = b_.Fresh(out + "/difference");
    b_.Node("Sub", {sum2, sq}, diff);
    const std::string half_name = b_.Fresh(out + "/half");
    {
      const double half = 0.5;
      onnx::TensorProto* t = graph_initializer(half_name);
      t->set_data_type(onnx::TensorProto::DOUBLE);
      t->set_raw_data(
          std::string(reinterpret_cast<const char*>(&half), sizeof(half)));
    }
    const std::string halved = b_.Fresh(out + "/halved");
    b_.Node("Mul", {diff, half_name}, halved);
    OnnxGraphBuilder::SetInt(b_.Node("Cast", {halved}, out), "to",
                             onnx::TensorProto::FLOAT);
    flat_[out] = out;
    return absl::OkStatus();
  }

  // A table as an initializer [rows + 1, dim] whose last row is zeros: the
  // row of padding and of ids the table does not hold.
  absl::StatusOr<std::string> TableValues(const TrainedVariable& v) {
    const std::string name = absl::StrCat(v.name, "/rows");
    if (!initialized_.insert(name).second) return name;
    const int64_t dim = v.shape[1];
    const int64_t rows = static_cast<int64_t>(v.values.size()) / dim;
    std::vector<float> values(v.values);
    values.resize((rows + 1) * dim, 0.0f);
    return b_.Floats(name, {rows + 1, dim}, values);
  }

  // The row of each id of `ids` ([batch, k] int64) in TableValues(v).
  std::string RowsOf(const TrainedVariable& v, const std::string& ids,
                     const std::string& hint) {
    const std::string rows = b_.Fresh(hint + "/rows");
    if (v.vocab_size > 0) {
      // id mod vocab_size (non-negative, as training maps ids), the padding
      // id to the zero row. Negative ids are ids (Criteo's 64-bit hashes
      // often are), so only the padding id itself is padding.
      const int64_t vocab = v.vocab_size;
      const std::string mod = b_.Fresh(hint + "/mod");
      b_.Node("Mod", {ids, b_.Int64s(b_.Fresh(hint + "/vocab"), {}, {vocab})},
              mod);
      const std::string pad = b_.Fresh(hint + "/is_padding");
      b_.Node(
          "Equal",
          {ids, b_.Int64s(b_.Fresh(hint + "/padding_id"), {}, {kPaddingId})},
          pad);
      b_.Node("Where",
              {pad, b_.Int64s(b_.Fresh(hint + "/zero_row"), {}, {vocab}), mod},
              rows);
      return rows;
    }
    const int64_t held = static_cast<int64_t>(v.ids.size());
    if (held == 0) {
      // Nothing trained: every id reads the zero row 0.
      b_.Node("Mul", {ids, b_.Int64s(b_.Fresh(hint + "/zero"), {}, {0})}, rows);
      return rows;
    }
    // ai.onnx.ml LabelEncoder: held id -> its row, anything else -> the
    // zero row.
    used_ml_ = true;
    std::vector<int64_t> index(held);
    std::iota(index.begin(), index.end(), 0);
    onnx::NodeProto* encoder =
        b_.Node("LabelEncoder", {ids}, rows, "ai.onnx.ml");
    OnnxGraphBuilder::SetInts(encoder, "keys_int64s", v.ids);
    OnnxGraphBuilder::SetInts(encoder, "values_int64s", index);
    OnnxGraphBuilder::SetInt(encoder, "default_int64", held);
    return rows;
  }

  absl::Status EmbeddingBag(const LayerDef& layer, const std::string& out) {
    const EmbeddingBagLayer& p = layer.embedding_bag();
    const int64_t dim = p.dim();
    const int n = layer.inputs_size();
    if (options_.pooled_inputs) {
      b_.Input(out, onnx::TensorProto::FLOAT, {0, n * dim});
      flat_[out] = out;
      return absl::OkStatus();
    }
    absl::StatusOr<const TrainedVariable*> table = Var(p.table());
    if (!table.ok()) return table.status();
    absl::StatusOr<std::string> values = TableValues(**table);
    if (!values.ok()) return values.status();
    // One id map and one gather for all the layer's fields (a table that
    // serves many fields holds its keys once), split back into the
    // fields, whose bag widths are known only when the model runs.
    std::vector<std::string> fields(layer.inputs().begin(),
                                    layer.inputs().end());
    std::vector<std::string> widths;
    for (const std::string& field : fields) {
      if (!sparse_.contains(field)) {
        return absl::InternalError(
            absl::StrCat("'", field, "' is not a sparse input"));
      }
      widths.push_back(b_.Fresh(out + "/width"));
      onnx::NodeProto* shape = b_.Node("Shape", {field}, widths.back());
      OnnxGraphBuilder::SetInt(shape, "start", 1);
      OnnxGraphBuilder::SetInt(shape, "end", 2);
    }
    const std::string ids = Concat(fields, 1, out + "/ids");
    const std::string rows = RowsOf(**table, ids, out);
    const std::string gathered = b_.Fresh(out + "/gathered");
    b_.Node("Gather", {*values, rows}, gathered);  // [batch, ids, dim]
    std::vector<std::string> parts = {gathered};
    if (n > 1) {
      parts.clear();
      for (int i = 0; i < n; ++i) parts.push_back(b_.Fresh(out + "/field"));
      const std::string split = Concat(widths, 0, out + "/split");
      OnnxGraphBuilder::SetInt(b_.NodeN("Split", {gathered, split}, parts),
                               "axis", 1);
    }
    const std::string axes = b_.Int64Vector(out + "/axes", {1});
    std::vector<std::string> pooled;
    for (int i = 0; i < n; ++i) {
      const std::string sum =
          n == 1 && p.combiner() == SUM ? out : b_.Fresh(out + "/sum");
      OnnxGraphBuilder::SetInt(b_.Node("ReduceSum", {parts[i], axes}, sum),
                               "keepdims", 0);
      if (p.combiner() == MEAN) {
        // Divided by the bag's ids that are not padding (at least 1).
        const std::string& field = fields[i];
        const std::string is_pad = b_.Fresh(out + "/is_padding");
        b_.Node(
            "Equal",
            {field, b_.Int64s(b_.Fresh(out + "/padding_id"), {}, {kPaddingId})},
            is_pad);
        const std::string real = b_.Fresh(out + "/is_id");
        b_.Node("Not", {is_pad}, real);
        const std::string ones = b_.Fresh(out + "/id_ones");
        OnnxGraphBuilder::SetInt(b_.Node("Cast", {real}, ones), "to",
                                 onnx::TensorProto::FLOAT);
        const std::string count = b_.Fresh(out + "/count");
        OnnxGraphBuilder::SetInt(b_.Node("ReduceSum", {ones, axes}, count),
                                 "keepdims", 1);
        const std::string divisor = b_.Fresh(out + "/divisor");
        b_.Node("Max", {count, b_.FloatScalar(out + "/one", 1.0f)}, divisor);
        const std::string mean = n == 1 ? out : b_.Fresh(out + "/mean");
        b_.Node("Div", {sum, divisor}, mean);
        pooled.push_back(mean);
      } else {
        pooled.push_back(sum);
      }
    }
    if (n > 1) {
      OnnxGraphBuilder::SetInt(b_.Node("Concat", pooled, out), "axis", 1);
    }
    flat_[out] = out;
    return absl::OkStatus();
  }

  onnx::TensorProto* graph_initializer(const std::string& name);

  const TrainedModel& m_;
  const OnnxExportOptions options_;
  OnnxGraphBuilder b_;
  onnx::GraphProto* const graph_;
  absl::flat_hash_map<std::string, std::string> flat_;
  absl::flat_hash_set<std::string> sparse_;
  absl::flat_hash_set<std::string> initialized_;
  bool used_ml_ = false;
};

onnx::TensorProto* Exporter::graph_initializer(const std::string& name) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  return t;
}

}  // namespace

absl::StatusOr<onnx::ModelProto> ExportOnnx(const TrainedModel& model,
                                            const OnnxExportOptions& options) {
  onnx::ModelProto proto;
  proto.set_ir_version(kOnnxIrVersion);
  proto.set_producer_name("tessera");
  proto.set_producer_version("1");
  proto.set_domain("ai.tessera");
  proto.set_model_version(model.global_step);
  proto.set_doc_string(absl::StrCat(
      "Exported by tessera_export from checkpoint ", model.checkpoint,
      " (global step ", model.global_step,
      "). Sparse inputs: int64 ids [batch, max_hotness], padded with -1."));
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name("tessera_model");
  Exporter exporter(model, options, graph);
  if (absl::Status s = exporter.Run(); !s.ok()) return s;
  if (exporter.used_ml()) {
    onnx::OperatorSetIdProto* ml = proto.add_opset_import();
    ml->set_domain("ai.onnx.ml");
    ml->set_version(kOnnxMlOpset);
  }
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{
           {"tessera.checkpoint", model.checkpoint},
           {"tessera.global_step", absl::StrCat(model.global_step)},
           {"tessera.padding_id", absl::StrCat(kPaddingId)}}) {
    onnx::StringStringEntryProto* entry = proto.add_metadata_props();
    entry->set_key(key);
    entry->set_value(value);
  }
  return proto;
}

namespace {

// Writes `bytes` to `path` under a temporary name, then renames it.
absl::Status WriteWhole(const std::string& path, absl::string_view bytes) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  const bool written =
      std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::DataLossError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

void AddEntry(onnx::TensorProto* t, const std::string& key,
              const std::string& value) {
  onnx::StringStringEntryProto* e = t->add_external_data();
  e->set_key(key);
  e->set_value(value);
}

}  // namespace

absl::Status WriteOnnxFile(onnx::ModelProto* model, const std::string& path,
                           bool external_data) {
  // Protobuf cannot parse a message of 2 GB or more: past a margin for the
  // graph itself, large initializers move to the side file.
  constexpr size_t kInlineLimit = size_t{1536} << 20;
  constexpr size_t kExternalAtLeast = 1024;
  if (external_data || model->ByteSizeLong() > kInlineLimit) {
    const size_t slash = path.rfind('/');
    const std::string location =
        (slash == std::string::npos ? path : path.substr(slash + 1)) + ".data";
    std::string side;
    for (onnx::TensorProto& t :
         *model->mutable_graph()->mutable_initializer()) {
      if (t.raw_data().size() < kExternalAtLeast) continue;
      // 4 KiB aligned, as onnx's own writer does, so a reader may mmap it.
      side.resize((side.size() + 4095) / 4096 * 4096, '\0');
      AddEntry(&t, "location", location);
      AddEntry(&t, "offset", absl::StrCat(side.size()));
      AddEntry(&t, "length", absl::StrCat(t.raw_data().size()));
      side += t.raw_data();
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
    }
    const std::string side_path =
        (slash == std::string::npos ? "" : path.substr(0, slash + 1)) +
        location;
    if (absl::Status s = WriteWhole(side_path, side); !s.ok()) return s;
  }
  const size_t bytes = model->ByteSizeLong();
  if (bytes > static_cast<size_t>(INT32_MAX)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the ONNX model is ", bytes,
        " bytes without its tables' values, over protobuf's 2 GB limit (the "
        "hashed tables' ids are node attributes, which cannot be external); "
        "export with --embeddings=pooled_inputs to leave the tables out"));
  }
  std::string data;
  if (!model->SerializeToString(&data)) {
    return absl::InternalError("could not serialize the ONNX model");
  }
  return WriteWhole(path, data);
}

}  // namespace tessera
