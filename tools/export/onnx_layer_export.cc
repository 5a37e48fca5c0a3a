// Each layer kind as ONNX operators, but embedding bags
// (onnx_embedding_export.cc).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tools/export/onnx_exporter.h"

namespace tessera {
namespace onnx_internal {

absl::Status Exporter::Dense(const LayerDef& layer,
                             const std::vector<std::string>& in,
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
    absl::StatusOr<std::string> b = Weight(absl::StrCat(layer.name(), "/bias"));
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

absl::Status Exporter::BatchNorm(const LayerDef& layer, const std::string& x,
                                 const std::string& out) {
  const int64_t c = ShapeOf(out).back();
  std::vector<std::string> args = {Reshape(x, {-1, c}, out + "/rows")};
  for (const char* v : {"gamma", "beta", "moving_mean", "moving_variance"}) {
    absl::StatusOr<std::string> w = Weight(absl::StrCat(layer.name(), "/", v));
    if (!w.ok()) return w.status();
    args.push_back(*w);
  }
  const std::string y = b_.Fresh(out + "/normalized");
  OnnxGraphBuilder::SetFloat(b_.Node("BatchNormalization", args, y), "epsilon",
                             layer.batch_norm().epsilon());
  b_.Node("Reshape", {y, b_.Int64Vector(out + "/shape", {-1, SizeOf(out)})},
          out);
  flat_[out] = out;
  return absl::OkStatus();
}

absl::Status Exporter::LayerNorm(const LayerDef& layer, const std::string& x,
                                 const std::string& out) {
  const int64_t c = ShapeOf(out).back();
  std::vector<std::string> args = {Reshape(x, {-1, c}, out + "/rows")};
  for (const char* v : {"gamma", "beta"}) {
    absl::StatusOr<std::string> w = Weight(absl::StrCat(layer.name(), "/", v));
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

absl::Status Exporter::Window(const LayerDef& layer, const std::string& x,
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
  OnnxGraphBuilder::SetInts(node, "pads", {begin[0], begin[1], end[0], end[1]});
  const std::string back = Transpose(y, {0, 2, 3, 1}, out + "/nhwc_out");
  const int64_t size = SizeOf(out);
  const Activation act = conv ? layer.conv2d().activation() : LINEAR;
  if (act == LINEAR) {
    b_.Node("Reshape", {back, b_.Int64Vector(out + "/shape", {-1, size})}, out);
    flat_[out] = out;
    return absl::OkStatus();
  }
  const std::string flat = Reshape(back, {-1, size}, out + "/flat");
  Activate(flat, act, out_shape.back(), size, out);
  return absl::OkStatus();
}

absl::Status Exporter::ConcatLayer(const LayerDef& layer,
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

std::string Exporter::Stack(const LayerDef& layer,
                            const std::vector<std::string>& in,
                            const std::string& out, int64_t* count,
                            int64_t* dim) {
  int64_t total = 0;
  for (const std::string& name : layer.inputs()) total += SizeOf(name);
  *dim = ShapeOf(layer.inputs(0)).back();
  *count = total / *dim;
  return Reshape(Concat(in, 1, out + "/stacked_flat"), {-1, *count, *dim},
                 out + "/stacked");
}

absl::Status Exporter::DotInteraction(const LayerDef& layer,
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
    OnnxGraphBuilder::SetInt(b_.Node("Concat", {in[0], gathered}, out), "axis",
                             1);
  }
  flat_[out] = out;
  return absl::OkStatus();
}

absl::Status Exporter::Cross(const LayerDef& layer, const std::string& x0,
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

absl::Status Exporter::FmOrder2(const LayerDef& layer,
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
  OnnxGraphBuilder::SetInt(b_.Node("ReduceSum", {wide, axes}, sum), "keepdims",
                           0);
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

}  // namespace onnx_internal
}  // namespace tessera
