#include "tools/export/onnx_export.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/atomic_file.h"
#include "tools/export/onnx_exporter.h"

namespace tessera {

absl::StatusOr<onnx::ModelProto> ExportOnnx(const TrainedModel& model,
                                            const OnnxExportOptions& options) {
  onnx::ModelProto proto;
  proto.set_ir_version(kOnnxIrVersion);
  proto.set_producer_name("tessera");
  proto.set_producer_version("1");
  proto.set_domain("ai.tessera");
  proto.set_model_version(model.global_step);
  proto.set_doc_string(
      absl::StrCat("Exported by tessera_export from checkpoint ",
                   model.checkpoint, " (after ", model.global_step,
                   " worker steps). Each embedding_bag layer's ids: input "
                   "<layer>_ids, int64 [batch, "
                   "fields, max_hotness], padded with -1."));
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name("tessera_model");
  onnx_internal::Exporter exporter(model, options, graph);
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
           {"tessera.padding_id", absl::StrCat(kOnnxPaddingId)}}) {
    onnx::StringStringEntryProto* entry = proto.add_metadata_props();
    entry->set_key(key);
    entry->set_value(value);
  }
  return proto;
}

namespace {

// An exported model is written whole or not at all, and survives a crash
// of the machine once written (common/io/atomic_file.h).
absl::Status WriteWhole(const std::string& path, absl::string_view bytes) {
  return WriteFileAtomically(path, bytes);
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
