// Writes a trained model out of a checkpoint, with no cluster running:
//
//   build/worker/export/tessera_export --checkpoint=/tmp/run/ckpt
//       --output=/tmp/model.onnx
//
// --checkpoint is a checkpoint root (its newest valid checkpoint is taken),
// one checkpoint folder (ckpt-0000000120) or a model file. Formats: ONNX
// (tools/export/onnx_export.h: with the tables, or with pooled embeddings
// as inputs and the tables as text files, --tables_dir), or the whole model
// as one file (--format=tessera, tools/export/model_file.h), or the
// variables as a PyTorch state_dict in a safetensors file (--format=
// safetensors, tools/torch/state_dict.h: the module's own names and
// layouts, for module.load_state_dict). Exit codes as
// every tool's (common/exit_code.h): 2 for a mistake in the command line or
// its paths (no checkpoint there, a file that is not one), 1 for a failure
// a retry might fix.

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/exit_code.h"
#include "gflags/gflags.h"
#include "tools/export/model_file.h"
#include "tools/export/onnx_export.h"
#include "tools/export/table_files.h"
#include "tools/export/trained_model.h"
#include "tools/torch/state_dict.h"

DEFINE_string(checkpoint, "",
              "A checkpoint root (its newest valid checkpoint), one "
              "checkpoint folder (<root>/ckpt-<step>) or a model file.");
DEFINE_string(output, "", "The file to write.");
DEFINE_string(format, "onnx",
              "onnx: an ONNX model (opset 17); tessera: the whole model as "
              "one file tessera_predict --checkpoint loads, with no "
              "parameter server; safetensors: the variables as a PyTorch "
              "state_dict (module.load_state_dict(safetensors.torch."
              "load_file(F))), a growing table's ids beside it as "
              "<table>.ids.");
DEFINE_string(embeddings, "tables",
              "tables: the embedding tables are in the model and its inputs "
              "are ids; pooled_inputs: the tables are left out and each "
              "embedding_bag layer's pooled output is an input.");
DEFINE_bool(external_data, false,
            "Write the weights and tables to <output>.data beside the ONNX "
            "file (ONNX external data); done anyway for a model over 2 GB.");
DEFINE_string(tables_dir, "",
              "Also write every embedding table as <dir>/<table>.tsv (id, "
              "tab, the row's values), for serving a model exported with "
              "--embeddings=pooled_inputs.");

namespace tessera {
namespace {

int Fail(const absl::Status& status) {
  return ExitWith("tessera_export", status);
}

int Run() {
  if (FLAGS_checkpoint.empty() || FLAGS_output.empty()) {
    return Fail(
        absl::InvalidArgumentError("--checkpoint and --output are required"));
  }
  if (FLAGS_format != "onnx" && FLAGS_format != "tessera" &&
      FLAGS_format != "safetensors") {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--format: '", FLAGS_format, "' is not onnx, tessera or safetensors")));
  }
  if (FLAGS_embeddings != "tables" && FLAGS_embeddings != "pooled_inputs") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--embeddings: '", FLAGS_embeddings,
                     "' is neither tables nor pooled_inputs")));
  }
  absl::StatusOr<TrainedModel> model = LoadTrainedModel(FLAGS_checkpoint);
  if (!model.ok()) return Fail(model.status());
  if (!FLAGS_tables_dir.empty()) {
    if (absl::Status s = WriteTableFiles(*model, FLAGS_tables_dir); !s.ok()) {
      return Fail(s);
    }
  }
  if (FLAGS_format == "tessera" || FLAGS_format == "safetensors") {
    absl::Status s = FLAGS_format == "tessera"
                         ? WriteModelFile(*model, FLAGS_output)
                         : WriteSafetensorsFile(
                               StateDictFromTrainedModel(*model), FLAGS_output);
    if (!s.ok()) return Fail(s);
    std::printf(
        "tessera_export: wrote %s (checkpoint %s, after %lld worker steps)\n",
        FLAGS_output.c_str(), model->checkpoint.c_str(),
        static_cast<long long>(model->global_step));
    return 0;
  }
  OnnxExportOptions options;
  options.pooled_inputs = FLAGS_embeddings == "pooled_inputs";
  absl::StatusOr<onnx::ModelProto> onnx = ExportOnnx(*model, options);
  if (!onnx.ok()) return Fail(onnx.status());
  if (absl::Status s = WriteOnnxFile(&*onnx, FLAGS_output, FLAGS_external_data);
      !s.ok()) {
    return Fail(s);
  }
  std::printf(
      "tessera_export: wrote %s (checkpoint %s, after %lld worker steps)\n",
      FLAGS_output.c_str(), model->checkpoint.c_str(),
      static_cast<long long>(model->global_step));
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Exports a trained model from a checkpoint (ONNX), with no cluster");
  tessera::ParseCommandLineOrExit(&argc, &argv);
  return tessera::Run();
}
