// tessera_keras: Keras models in and out of Tessera.
//
//   tessera_keras import --model=model.keras --output=job.textproto
//       [--checkpoint_out=DIR] [--data_from=JOB] [--loss=NAME]
//   tessera_keras export --checkpoint=DIR --output=model.keras
//
// import reads a Keras 3 .keras archive or the JSON of model.to_json()
// (Keras 3 or Keras 2 / tf_keras) and writes a job file; with
// --checkpoint_out, the saved weights as a checkpoint that
// `tessera_coordinator --init_checkpoint=DIR` starts from. export writes a
// trained checkpoint as a .keras archive that keras.saving.load_model
// loads. Exit code 2 for a bad command line, a model Tessera cannot
// express (the error names the layer, its class and why) or a file that is
// not a Keras model; 1 for what a retry might fix (docs/exit_codes.md).

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/exit_code.h"
#include "common/io/atomic_file.h"
#include "common/job_file.h"
#include "common/model/model_graph.h"
#include "gflags/gflags.h"
#include "google/protobuf/text_format.h"
#include "tools/export/trained_model.h"
#include "tools/keras/initial_checkpoint.h"
#include "tools/keras/keras_archive.h"
#include "tools/keras/keras_export.h"
#include "tools/keras/keras_import.h"

DEFINE_string(model, "",
              "import: a Keras 3 .keras archive, or the JSON of "
              "model.to_json() (Keras 3 or Keras 2).");
DEFINE_string(output, "",
              "import: the job file to write; export: the .keras file.");
DEFINE_string(checkpoint_out, "",
              "import: also write the model's saved weights as a checkpoint "
              "under this root, for tessera_coordinator --init_checkpoint "
              "(a .keras archive only).");
DEFINE_string(data_from, "",
              "import: copy the data section of this job file (else a "
              "commented placeholder is written).");
DEFINE_string(loss, "",
              "import: the Keras loss of a model without a compile config "
              "(to_json() has none): sparse_categorical_crossentropy, "
              "binary_crossentropy or mean_squared_error.");
DEFINE_string(checkpoint, "",
              "export: a checkpoint root (its newest valid checkpoint), one "
              "checkpoint folder or a model file.");

namespace tessera {
namespace {

// Exit codes as docs/exit_codes.md: 2 for what the user must change (a
// refused model, a bad file or flag), 1 for what a retry might fix.
int Fail(const absl::Status& status) {
  return ExitWith("tessera_keras", status);
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  absl::Status s = WriteFileAtomically(path, text);
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("--output=", path, ": ", s.message()));
}

// `m`'s fields, indented as the inside of a block of the job file.
std::string Text(const google::protobuf::Message& m) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetInitialIndentLevel(1);
  printer.PrintToString(m, &text);
  return text;
}

// The data section of a job with no --data_from: one a dry run accepts and
// a user replaces.
std::string PlaceholderData(const ModelDef& model) {
  if (model.inputs_size() == 1 && model.inputs(0).has_dense() &&
      model.label().kind() == LabelDef::CLASS_INDEX) {
    return "# The examples. Format \"idx\" reads MNIST-format files: these\n"
           "# stand for Fashion-MNIST's (--data_dir=DIR reads a folder of\n"
           "# them). For your own data use format \"tfrecord\" or \"csv\"\n"
           "# with train_files and test_files, or import again with\n"
           "# --data_from=JOB to copy a job's data section.\n"
           "data { format: \"idx\" }\n";
  }
  return "# The examples: REPLACE the globs below with your files (TFRecord\n"
         "# files of tf.train.Example, a feature per model input named as the\n"
         "# input, the label in feature \"label\"; or format \"csv\"), or\n"
         "# import again with --data_from=JOB to copy a job's data section.\n"
         "# Until then, tessera_coordinator --dry_run --check_data=false\n"
         "# checks the model alone.\n"
         "data {\n"
         "  format: \"tfrecord\"\n"
         "  train_files: \"REPLACE_ME/train-*.tfrecord\"\n"
         "  test_files: \"REPLACE_ME/test-*.tfrecord\"\n"
         "  label_feature: \"label\"\n"
         "}\n";
}

constexpr char kTableUpdatesComment[] =
    "# Dense table updates: every row of a table steps each update, as Keras'\n"
    "# optimizers step an Embedding; TABLE_UPDATES_LAZY steps only the rows\n"
    "# a batch touched (TF's LazyAdam), at less cost on large tables.\n";

int Import() {
  if (FLAGS_model.empty() || FLAGS_output.empty()) {
    return Fail(absl::InvalidArgumentError(
        "import: --model and --output are required"));
  }
  absl::StatusOr<KerasModelFile> file = ReadKerasModelFile(FLAGS_model);
  if (!file.ok()) return Fail(file.status());
  KerasImportOptions options;
  options.loss = FLAGS_loss;
  absl::StatusOr<KerasImport> imported = ImportKerasModel(*file, options);
  if (!imported.ok()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(FLAGS_model, ": ", imported.status().message())));
  }
  if (!FLAGS_checkpoint_out.empty() && !file->has_weights) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--checkpoint_out: ", FLAGS_model,
                     " holds no weights (a JSON config); save the model as "
                     "a .keras file")));
  }
  JobConfig job = imported->job;
  std::string data;
  if (!FLAGS_data_from.empty()) {
    absl::StatusOr<JobConfig> from = ReadJobFile(FLAGS_data_from);
    if (!from.ok()) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--data_from: ", from.status().message())));
    }
    data = absl::StrCat("# The data section of ", FLAGS_data_from, ".\n",
                        "data {\n", Text(from->data()), "}\n");
  } else {
    data = PlaceholderData(job.model_def());
  }
  std::string checkpoint;
  if (!FLAGS_checkpoint_out.empty()) {
    absl::StatusOr<std::string> written =
        WriteInitialCheckpoint(job, imported->values, FLAGS_checkpoint_out);
    if (!written.ok()) return Fail(written.status());
    checkpoint = *written;
  }
  // Keras steps every row of an Embedding; the import keeps that
  // (TABLE_UPDATES_DENSE), and says so where a model has tables.
  const bool tables = std::any_of(
      job.model_def().inputs().begin(), job.model_def().inputs().end(),
      [](const InputDef& in) { return in.has_sparse(); });
  std::string text = absl::StrCat(
      "# Imported from ", FLAGS_model, " by tessera_keras import.\n",
      checkpoint.empty()
          ? ""
          : absl::StrCat("# The saved weights are the checkpoint ", checkpoint,
                         ": start from them with\n#   tessera_coordinator "
                         "--init_checkpoint=",
                         FLAGS_checkpoint_out, "\n"),
      "model_def {\n", Text(job.model_def()), "}\n", data,
      tables ? kTableUpdatesComment : "", "optimizer {\n",
      Text(job.optimizer()), "}\n",
      "# Keras' fit() defaults; --epochs and --batch_size override them.\n",
      "schedule {\n", Text(job.schedule()), "}\n");
  if (absl::Status s = WriteFile(FLAGS_output, text); !s.ok()) {
    return Fail(s);
  }
  for (const std::string& note : imported->notes) {
    std::printf("note: %s\n", note.c_str());
  }
  if (tables) {
    std::printf(
        "note: embedding tables step every row each update "
        "(table_updates: TABLE_UPDATES_DENSE), as Keras' optimizers do; "
        "TABLE_UPDATES_LAZY (or --table_updates=lazy) steps only the rows "
        "a batch touched, as TF's LazyAdam, at less cost on large tables\n");
  }
  std::printf("tessera_keras: wrote %s (%d inputs, %d layers, %zu variables",
              FLAGS_output.c_str(), job.model_def().inputs_size(),
              job.model_def().layers_size(), imported->values.size());
  if (!checkpoint.empty()) {
    std::printf("; checkpoint %s", checkpoint.c_str());
  }
  std::printf(")\n");
  return 0;
}

std::string Now() {
  char buffer[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d@%H:%M:%S", std::gmtime(&t));
  return buffer;
}

int Export() {
  if (FLAGS_checkpoint.empty() || FLAGS_output.empty()) {
    return Fail(absl::InvalidArgumentError(
        "export: --checkpoint and --output are required"));
  }
  absl::StatusOr<TrainedModel> model = LoadTrainedModel(FLAGS_checkpoint);
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<KerasExport> keras = ExportKerasModel(*model);
  if (!keras.ok()) return Fail(keras.status());
  // The layout of Keras 3.15's files, which this writes.
  nlohmann::json metadata = {{"keras_version", "3.15.1"},
                             {"date_saved", Now()}};
  if (absl::Status s = WriteKerasArchive(FLAGS_output, keras->config, metadata,
                                         keras->weights, keras->model_name,
                                         keras->optimizer_name);
      !s.ok()) {
    return Fail(s);
  }
  // Steps are worker steps everywhere (docs/operations.md, "Steps and
  // global steps"), as the checkpoint's name counts them.
  std::printf(
      "tessera_keras: wrote %s (checkpoint %s, after %lld worker steps)\n",
      FLAGS_output.c_str(), model->checkpoint.c_str(),
      static_cast<long long>(model->global_step));
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "tessera_keras import --model=FILE --output=JOB [--checkpoint_out=DIR] "
      "[--data_from=JOB] | export --checkpoint=DIR --output=MODEL.keras");
  tessera::ParseCommandLineOrExit(&argc, &argv);
  const std::string command = argc > 1 ? argv[1] : "";
  if (argc != 2 || (command != "import" && command != "export")) {
    std::fprintf(stderr,
                 "tessera_keras: give one command, import or export (%s)\n",
                 gflags::ProgramUsage());
    return tessera::kExitUserError;
  }
  return command == "import" ? tessera::Import() : tessera::Export();
}
