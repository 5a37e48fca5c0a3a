// Embedding tables and bags as ONNX: ids to rows (LabelEncoder for a growing
// table, id mod vocab_size for a fixed one), Gather, ReduceSum.
#include <numeric>

#include "absl/strings/str_cat.h"
#include "worker/export/onnx_exporter.h"

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

absl::Status Exporter::EmbeddingBag(const LayerDef& layer,
                                    const std::string& out) {
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
  std::vector<std::string> fields(layer.inputs().begin(), layer.inputs().end());
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
      b_.Node("Equal",
              {field,
               b_.Int64s(b_.Fresh(out + "/padding_id"), {}, {kOnnxPaddingId})},
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

}  // namespace onnx_internal
}  // namespace tessera
