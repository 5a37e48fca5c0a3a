// Embedding tables and bags as ONNX: each layer's [batch, fields, hotness]
// ids to rows (LabelEncoder for a growing table, id mod vocab_size for a
// fixed one), Gather, ReduceSum over the hotness axis.
#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/export/onnx_exporter.h"

namespace tessera {
namespace onnx_internal {

absl::StatusOr<std::string> Exporter::TableValues(const TrainedVariable& v) {
  const std::string name = absl::StrCat(v.name, "/rows");
  if (!initialized_.insert(name).second) return name;
  const int64_t dim = v.shape[1];
  const int64_t rows = static_cast<int64_t>(v.values.size()) / dim;
  std::vector<float> values(v.values);
  values.resize((rows + 1) * dim, 0.0f);
  return b_.Floats(name, {rows + 1, dim}, values);
}

std::string Exporter::RowsOf(const TrainedVariable& v, const std::string& ids,
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
        {ids, b_.Int64s(b_.Fresh(hint + "/padding_id"), {}, {kOnnxPaddingId})},
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
  onnx::NodeProto* encoder = b_.Node("LabelEncoder", {ids}, rows, "ai.onnx.ml");
  OnnxGraphBuilder::SetInts(encoder, "keys_int64s", v.ids);
  OnnxGraphBuilder::SetInts(encoder, "values_int64s", index);
  OnnxGraphBuilder::SetInt(encoder, "default_int64", held);
  return rows;
}

std::string Exporter::IdsInputName(const LayerDef& layer) {
  return absl::StrCat(OutputOf(layer), "_ids");
}

absl::StatusOr<std::string> Exporter::AddIdsInput(const LayerDef& layer) {
  // One input per layer, [batch, fields, hotness]: the layer's fields in
  // order, each bag padded with -1 to the hotness (the largest max_hotness
  // of the fields is what the description expects; a wider input works,
  // as training takes bags of any size). A field that several layers read
  // appears in each of their inputs: every layer's input then maps to its
  // table alone, and a server feeds what it already stacks per table.
  const std::string ids = IdsInputName(layer);
  if (m_.graph.tensors.contains(ids)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "its ONNX id input '", ids, "' would take the name of a tensor"));
  }
  int64_t hotness = 1;
  for (const std::string& field : layer.inputs()) {
    auto it = sparse_.find(field);
    if (it == sparse_.end()) {
      return absl::InternalError(
          absl::StrCat("'", field, "' is not a sparse input"));
    }
    hotness = std::max<int64_t>(hotness, it->second);
  }
  b_.Input(ids, onnx::TensorProto::INT64, {0, layer.inputs_size(), 0},
           {"batch", "", absl::StrCat(ids, "_hotness")});
  // What a server needs to build it, on the input itself.
  graph_->mutable_input(graph_->input_size() - 1)
      ->set_doc_string(
          absl::StrCat("ids of ", absl::StrJoin(layer.inputs(), ", "),
                       " in that order, each bag padded with ", kOnnxPaddingId,
                       " to ", hotness, " (their max_hotness) or wider"));
  return ids;
}

std::string Exporter::MeanOverIds(const std::string& ids,
                                  const std::string& sum,
                                  const std::string& axes,
                                  const std::string& out) {
  // Divided by the bag's true count, its ids that are not padding (at
  // least 1: an empty bag stays zeros, as training's).
  const std::string is_pad = b_.Fresh(out + "/is_padding");
  b_.Node("Equal",
          {ids, b_.Int64s(b_.Fresh(out + "/padding_id"), {}, {kOnnxPaddingId})},
          is_pad);
  const std::string real = b_.Fresh(out + "/is_id");
  b_.Node("Not", {is_pad}, real);
  const std::string ones = b_.Fresh(out + "/id_ones");
  OnnxGraphBuilder::SetInt(b_.Node("Cast", {real}, ones), "to",
                           onnx::TensorProto::FLOAT);
  const std::string count = b_.Fresh(out + "/count");
  OnnxGraphBuilder::SetInt(b_.Node("ReduceSum", {ones, axes}, count),
                           "keepdims", 0);  // [batch, n]
  const std::string divisor = b_.Fresh(out + "/divisor");
  b_.Node("Max", {count, b_.FloatScalar(out + "/one", 1.0f)}, divisor);
  const std::string column = b_.Fresh(out + "/divisor_column");
  b_.Node("Unsqueeze", {divisor, b_.Int64Vector(out + "/last_axis", {2})},
          column);  // [batch, n, 1]
  const std::string mean = b_.Fresh(out + "/mean");
  b_.Node("Div", {sum, column}, mean);
  return mean;
}

absl::Status Exporter::EmbeddingBag(const LayerDef& layer,
                                    const std::string& out) {
  const EmbeddingBagLayer& p = layer.embedding_bag();
  const int64_t dim = p.dim();
  const int64_t n = layer.inputs_size();
  if (options_.pooled_inputs) {
    b_.Input(out, onnx::TensorProto::FLOAT, {0, n * dim});
    flat_[out] = out;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ids = AddIdsInput(layer);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<const TrainedVariable*> table = Var(p.table());
  if (!table.ok()) return table.status();
  absl::StatusOr<std::string> values = TableValues(**table);
  if (!values.ok()) return values.status();
  const std::string rows = RowsOf(**table, *ids, out);
  const std::string gathered = b_.Fresh(out + "/gathered");
  b_.Node("Gather", {*values, rows}, gathered);  // [batch, n, hotness, dim]
  // ReduceSum over the hotness axis (opset 13+ takes axes as an input):
  // padding reads the zero row, so it adds nothing.
  const std::string axes = b_.Int64Vector(out + "/axes", {2});
  const std::string sum = b_.Fresh(out + "/sum");
  OnnxGraphBuilder::SetInt(b_.Node("ReduceSum", {gathered, axes}, sum),
                           "keepdims", 0);  // [batch, n, dim]
  const std::string pooled =
      p.combiner() == MEAN ? MeanOverIds(*ids, sum, axes, out) : sum;
  // Training's layout: field f's vector at columns [f * dim, (f + 1) * dim)
  // (Graph's stride), so [batch, n, dim] flattens to it. The 0 copies the
  // batch, which -1 could not infer from an empty batch.
  b_.Node("Reshape", {pooled, b_.Int64Vector(out + "/shape", {0, n * dim})},
          out);
  flat_[out] = out;
  return absl::OkStatus();
}

}  // namespace onnx_internal
}  // namespace tessera
