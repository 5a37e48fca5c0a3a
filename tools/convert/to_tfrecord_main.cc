// tessera_to_tfrecord: writes Fashion-MNIST IDX files or Criteo TSV
// (tessera_ctr_gen's output) as sharded TFRecord files of tf.train.Example
// or CSV files (tools/convert/example_converter.h says what they hold).
//
//   tessera_to_tfrecord --from=idx --images=train-images-idx3-ubyte.gz \
//       --labels=train-labels-idx1-ubyte.gz --prefix=/data/fm/train \
//       --shards=8 --gzip
//   tessera_to_tfrecord --from=criteo --input=/tmp/ctr/train.tsv \
//       --prefix=/data/ctr/train --shards=16 --format=csv
//
// The prefix's folder is created if missing. Exit codes as every tool's
// (common/exit_code.h): 2 for a mistake in the flags or a file that is not
// there, 1 for a failure a retry might fix.

#include <cstdio>
#include <optional>

#include "common/command_line.h"
#include "common/data_format.h"
#include "common/exit_code.h"
#include "common/io/output_folder.h"
#include "data/criteo/criteo_reader.h"
#include "data/idx/mnist_dataset.h"
#include "gflags/gflags.h"
#include "tools/convert/example_converter.h"

DEFINE_string(from, "idx", "Source format: idx or criteo.");
DEFINE_string(images, "", "idx: the images file (gzipped or not).");
DEFINE_string(labels, "", "idx: the labels file.");
DEFINE_string(input, "", "criteo: the TSV file (gzipped or not).");
DEFINE_int32(num_dense, 13, "criteo: integer columns.");
DEFINE_int32(num_fields, 26, "criteo: categorical columns.");
DEFINE_string(prefix, "", "Output files are <prefix>-<k>-of-<n>.<format>.");
DEFINE_string(format, "tfrecord", "Output format: tfrecord or csv.");
DEFINE_int32(shards, 1, "Number of output files.");
DEFINE_bool(gzip, false, "Compress the output (TensorFlow's GZIP).");
DEFINE_int64(examples, -1,
             "Convert only the first N examples (-1: all), for a smaller "
             "copy of a data set.");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Converts IDX or Criteo TSV data to TFRecord (tf.train.Example) or "
      "CSV shards.");
  tessera::ParseCommandLineOrExit(&argc, &argv);
  const std::optional<tessera::DataFormat> from =
      tessera::DataFormatNamed(FLAGS_from);
  if (FLAGS_prefix.empty() || FLAGS_shards < 1 ||
      (FLAGS_examples < 1 && FLAGS_examples != -1) ||
      (from != tessera::DataFormat::kIdx &&
       from != tessera::DataFormat::kCriteo) ||
      (from == tessera::DataFormat::kIdx &&
       (FLAGS_images.empty() || FLAGS_labels.empty())) ||
      (from == tessera::DataFormat::kCriteo && FLAGS_input.empty())) {
    std::fprintf(stderr,
                 "tessera_to_tfrecord: need --prefix, --shards >= 1, "
                 "--examples >= 1 (or -1: all) and "
                 "--from=idx with --images and --labels, or --from=criteo "
                 "with --input\n");
    return tessera::kExitUserError;
  }
  constexpr char kProgram[] = "tessera_to_tfrecord";
  if (absl::Status s = tessera::CreateParentFolder(FLAGS_prefix); !s.ok()) {
    return tessera::ExitWith(kProgram, s);
  }
  tessera::ConvertOptions options;
  options.output_format = FLAGS_format;
  options.prefix = FLAGS_prefix;
  options.shards = FLAGS_shards;
  options.gzip = FLAGS_gzip;
  absl::StatusOr<std::vector<std::string>> written;
  if (from == tessera::DataFormat::kIdx) {
    absl::StatusOr<tessera::MnistDataset> data =
        tessera::LoadMnist(FLAGS_images, FLAGS_labels, 0, FLAGS_examples);
    if (!data.ok()) return tessera::ExitWith(kProgram, data.status());
    written = tessera::ConvertMnist(*data, options);
  } else {
    absl::StatusOr<tessera::CtrDataset> data = tessera::LoadCriteo(
        FLAGS_input, 0, FLAGS_examples,
        tessera::CriteoFormat{FLAGS_num_dense, FLAGS_num_fields});
    if (!data.ok()) return tessera::ExitWith(kProgram, data.status());
    written = tessera::ConvertCtr(*data, options);
  }
  if (!written.ok()) return tessera::ExitWith(kProgram, written.status());
  for (const std::string& path : *written) std::printf("%s\n", path.c_str());
  return 0;
}
