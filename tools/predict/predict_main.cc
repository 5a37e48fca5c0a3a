// Predicts examples with a trained model read from a checkpoint, on the
// CPU (or a GPU, --device), with no cluster:
//
//   build/worker/predict/tessera_predict --checkpoint=/tmp/run/ckpt
//       --output=/tmp/predictions.jsonl
//
// Reads the job's test set (or --data_dir's, in the job's data format),
// writes one line per example: JSON lines
//   {"index":0,"probabilities":[0.01,...],"class":3}
// or CSV (index,p0,...,class), a progress line with examples/s on stderr,
// and, when the examples carry labels, the metrics training prints for its
// test set. New examples need no labels (--examples, a Criteo file without
// its label column, IDX images without --labels): their lines are the
// same, and the metrics line says there were no labels. Exit codes as every
// tool's (common/exit_code.h): 2 for a mistake in the command line or its
// paths, 1 for a failure a retry might fix.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/binary_metrics.h"
#include "common/command_line.h"
#include "common/data_format.h"
#include "common/exit_code.h"
#include "common/job_file.h"
#include "common/progress_line.h"
#include "data/example_set.h"
#include "data/stream/stream_examples.h"
#include "gflags/gflags.h"
#include "tools/export/trained_model.h"
#include "tools/predict/prediction_lines.h"
#include "tools/predict/predictor.h"
#include "worker/backend/device_choice.h"

DEFINE_string(checkpoint, "",
              "A checkpoint root (its newest valid checkpoint), one "
              "checkpoint folder (<root>/ckpt-<step>) or a model file "
              "(tessera_export --format=tessera).");
DEFINE_string(data_dir, "",
              "Read the examples from this folder (the job's data format: "
              "IDX files, or train.tsv and test.tsv) instead of the job's.");
DEFINE_string(split, "test", "test or train: which of the job's files.");
DEFINE_string(examples, "",
              "Predict the examples in this file instead (the job's data "
              "format): a Criteo TSV file, with or without its label column "
              "(one column fewer: no label first), or an IDX images file.");
DEFINE_string(labels, "",
              "The IDX labels file of --examples' images; omitted, the images "
              "have no labels.");
DEFINE_int64(max_examples, -1,
             "Predict only the first N examples (N >= 1; -1: all).");
DEFINE_int32(batch_size, 1024, "Examples per forward pass.");
DEFINE_string(output, "-", "Where the predictions go; '-' for stdout.");
DEFINE_string(output_format, "jsonl", "jsonl or csv.");
DEFINE_int32(threads, 0,
             "Batches predicted at once on the CPU, each by its own copy of "
             "the layer graph sharing the model's tables (0: one per core; "
             "no more than 1024).");
DEFINE_string(device, "cpu",
              "cpu, cuda (= cuda:0), cuda:N, or auto (a GPU when one answers "
              "and this build has CUDA).");
DEFINE_string(write_inputs, "",
              "Also write each example as the exported ONNX model's inputs, "
              "one JSON object a line ({\"index\": i, \"label\": y, each "
              "dense input's floats by its name, per embedding_bag layer "
              "\"<output>_ids\": its fields' bags of ids padded with -1 to "
              "[fields][max_hotness], and per embedding_bag layer its "
              "output's name: the pooled embeddings, the inputs of an export "
              "with --embeddings=pooled_inputs}), to feed another runtime the "
              "same examples.");

namespace tessera {
namespace {

int Fail(const absl::Status& status) {
  return ExitWith("tessera_predict", status);
}

int Run() {
  if (FLAGS_checkpoint.empty()) {
    return Fail(absl::InvalidArgumentError("--checkpoint is required"));
  }
  const bool csv = FLAGS_output_format == "csv";
  if (!csv && FLAGS_output_format != "jsonl") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--output_format: '", FLAGS_output_format,
                     "' is neither jsonl nor csv")));
  }
  if (FLAGS_split != "test" && FLAGS_split != "train") {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--split: '", FLAGS_split, "' is neither test nor train")));
  }
  if (FLAGS_batch_size < 1) {
    return Fail(absl::InvalidArgumentError("--batch_size must be >= 1"));
  }
  // 0 would print metrics over no examples, as if the model scored 0.
  if (FLAGS_max_examples < 1 && FLAGS_max_examples != -1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--max_examples must be a number of examples >= 1 (or "
                     "-1: all of them), got ",
                     FLAGS_max_examples)));
  }
  if (FLAGS_threads < 0 || FLAGS_threads > 1024) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--threads must be between 0 (one per core) and 1024, "
                     "got ",
                     FLAGS_threads)));
  }
  absl::StatusOr<TrainedModel> model = LoadTrainedModel(FLAGS_checkpoint);
  if (!model.ok()) return Fail(model.status());
  DataConfig data = model->job.data();
  if (!FLAGS_data_dir.empty()) SetDataDir(FLAGS_data_dir, &data);
  // The whole file: the cap a training run set is no reason to predict
  // fewer (--max_examples is).
  data.set_train_examples(0);
  data.set_test_examples(0);
  bool train = FLAGS_split == "train";
  const bool criteo = DataFormatNamed(data.format()) == DataFormat::kCriteo;
  if (!FLAGS_labels.empty() && (FLAGS_examples.empty() || criteo)) {
    return Fail(absl::InvalidArgumentError(
        "--labels goes with --examples, for IDX images (a "
        "Criteo file's label is its first column)"));
  }
  if (!FLAGS_examples.empty()) {
    train = false;
    if (IsStreamedFormat(data.format())) {
      data.clear_test_files();
      data.add_test_files(FLAGS_examples);
    } else if (criteo) {
      data.set_test_path(FLAGS_examples);
    } else {
      data.set_test_images(FLAGS_examples);
      data.set_test_labels(FLAGS_labels);
    }
  } else if (!criteo && !IsStreamedFormat(data.format()) &&
             !FLAGS_data_dir.empty()) {
    // A folder of images to predict may hold no labels file.
    std::string* labels =
        train ? data.mutable_train_labels() : data.mutable_test_labels();
    if (!std::filesystem::exists(*labels)) labels->clear();
  }
  absl::StatusOr<int64_t> count = CountExamples(data, train);
  if (!count.ok()) return Fail(count.status());
  int64_t n = *count;
  if (FLAGS_max_examples >= 0) n = std::min(n, FLAGS_max_examples);
  absl::StatusOr<std::unique_ptr<ExampleSet>> examples =
      LoadExamples(data, model->model, train, 0, n, LabelUse::kOptional);
  if (!examples.ok()) return Fail(examples.status());
  const bool labeled = (*examples)->has_labels();

  absl::StatusOr<DeviceChoice> device = ChooseDeviceForFlag(FLAGS_device);
  if (!device.ok()) return Fail(device.status());
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(*device);
  if (!backend.ok()) return Fail(backend.status());
  std::fprintf(stderr, "tessera_predict: on %s (%s)\n", device->device.c_str(),
               device->reason.c_str());
  // A graph runs one batch at a time: each thread has its own, all of
  // them reading the one copy of the tables.
  const int threads =
      device->cuda
          ? 1
          : std::max(
                1, FLAGS_threads > 0
                       ? FLAGS_threads
                       : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Predictor>> predictors;
  backends.push_back(*std::move(backend));
  for (int t = 0; t < threads; ++t) {
    if (t > 0) {
      absl::StatusOr<std::unique_ptr<Backend>> more = MakeBackend(*device);
      if (!more.ok()) return Fail(more.status());
      backends.push_back(*std::move(more));
    }
    absl::StatusOr<std::unique_ptr<Predictor>> p =
        Predictor::Create(*model, backends.back().get());
    if (!p.ok()) return Fail(p.status());
    predictors.push_back(*std::move(p));
  }
  const Predictor& first = *predictors[0];
  const LossDef::Kind loss = model->model.loss().kind();
  const bool classes = loss != LossDef::MEAN_SQUARED_ERROR;
  const int64_t width = first.output_size();
  const bool binary = model->model.label().kind() == LabelDef::BINARY &&
                      width == 1 && loss == LossDef::SIGMOID_CROSS_ENTROPY;

  std::FILE* out = stdout;
  if (FLAGS_output != "-") {
    out = std::fopen(FLAGS_output.c_str(), "w");
    if (out == nullptr) {
      return Fail(absl::PermissionDeniedError(
          absl::StrCat("cannot write ", FLAGS_output)));
    }
  }
  PredictionLayout layout;
  layout.format = csv ? PredictionFormat::kCsv : PredictionFormat::kJsonLines;
  layout.classes = classes;
  layout.width = width;
  if (csv) std::fprintf(out, "%s\n", PredictionHeader(layout).c_str());

  std::FILE* inputs_out = nullptr;
  if (!FLAGS_write_inputs.empty()) {
    inputs_out = std::fopen(FLAGS_write_inputs.c_str(), "w");
    if (inputs_out == nullptr) {
      return Fail(absl::PermissionDeniedError(
          absl::StrCat("cannot write ", FLAGS_write_inputs)));
    }
  }
  // One batch per thread, predicted at once, written in order.
  struct Slot {
    int64_t at = 0, size = 0;
    std::vector<int64_t> indices;
    HostBatch batch;
    std::vector<float> outputs;
    absl::StatusOr<GraphResult> result;
    double secs = 0;  // the forward pass
  };
  std::vector<Slot> slots(threads);
  auto work = [&](int i) {
    Slot& slot = slots[i];
    slot.indices.resize(slot.size);
    std::iota(slot.indices.begin(), slot.indices.end(), slot.at);
    if (absl::Status s = (*examples)->Gather(slot.indices, &slot.batch);
        !s.ok()) {
      slot.result = s;
      return;
    }
    const auto forward_start = std::chrono::steady_clock::now();
    slot.result = predictors[i]->Predict(slot.batch, &slot.outputs);
    slot.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              forward_start)
                    .count();
  };
  std::vector<float> probabilities, labels;
  std::string line;
  double loss_sum = 0, forward_secs = 0;
  int64_t correct = 0;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  // Redrawn on a terminal; plain lines in a log file or a Slurm output.
  ProgressLine progress(stderr);
  const int64_t round = static_cast<int64_t>(threads) * FLAGS_batch_size;
  for (int64_t round_at = 0; round_at < n; round_at += round) {
    int k = 0;
    for (; k < threads && round_at + k * FLAGS_batch_size < n; ++k) {
      slots[k].at = round_at + k * FLAGS_batch_size;
      slots[k].size = std::min<int64_t>(FLAGS_batch_size, n - slots[k].at);
    }
    std::vector<std::thread> pool;
    for (int i = 1; i < k; ++i) pool.emplace_back(work, i);
    work(0);
    for (std::thread& t : pool) t.join();
    double round_secs = 0;
    for (int i = 0; i < k; ++i) {
      round_secs = std::max(round_secs, slots[i].secs);
    }
    forward_secs += round_secs;
    for (int i = 0; i < k; ++i) {
      const Slot& slot = slots[i];
      if (!slot.result.ok()) return Fail(slot.result.status());
      const int64_t at = slot.at, size = slot.size;
      const HostBatch& batch = slot.batch;
      const std::vector<float>& outputs = slot.outputs;
      loss_sum += slot.result->loss_sum;
      correct += slot.result->correct;
      if (binary && labeled) {
        probabilities.insert(probabilities.end(), outputs.begin(),
                             outputs.end());
        labels.insert(labels.end(), batch.labels.begin(), batch.labels.end());
      }
      for (int64_t b = 0; b < size; ++b) {
        line.clear();
        AppendPrediction(layout, at + b,
                         absl::MakeConstSpan(outputs.data() + b * width, width),
                         &line);
        std::fwrite(line.data(), 1, line.size(), out);
        if (inputs_out != nullptr) {
          line.clear();
          AppendOnnxInputs(model->model, batch, b, at + b, first, &line);
          std::fwrite(line.data(), 1, line.size(), inputs_out);
        }
      }
    }
    const auto now = std::chrono::steady_clock::now();
    const int64_t done = slots[k - 1].at + slots[k - 1].size;
    if (now - last > std::chrono::milliseconds(500) || done == n) {
      last = now;
      const double secs = std::chrono::duration<double>(now - start).count();
      const double rate = done / std::max(secs, 1e-9);
      progress.Update(absl::StrFormat("predict %6.1f%%  %8.0f ex/s  ETA %4.0fs",
                                      100.0 * done / std::max<int64_t>(1, n),
                                      rate, (n - done) / std::max(rate, 1.0)));
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  progress.Finish();
  if (inputs_out != nullptr && std::fclose(inputs_out) != 0) {
    return Fail(
        absl::DataLossError(absl::StrCat("cannot write ", FLAGS_write_inputs)));
  }
  if (out != stdout && std::fclose(out) != 0) {
    return Fail(
        absl::DataLossError(absl::StrCat("cannot write ", FLAGS_output)));
  }
  // The metrics training prints for its test set, when there are labels.
  const int64_t total = std::max<int64_t>(1, n);
  std::string metrics =
      absl::StrCat("tessera_predict: ", n, " examples, checkpoint after ",
                   model->global_step, " worker steps");
  if (!labeled) {
    absl::StrAppend(&metrics, "  no labels, so no metrics");
  } else {
    absl::StrAppend(&metrics,
                    LabeledMetrics(layout, loss_sum / total,
                                   static_cast<double>(correct) / total));
  }
  if (binary && labeled && !probabilities.empty()) {
    absl::StatusOr<double> auc = RocAuc(probabilities, labels);
    if (auc.ok())
      absl::StrAppend(&metrics, absl::StrFormat("  auc %.4f", *auc));
    absl::StatusOr<double> log_loss = LogLoss(probabilities, labels);
    if (log_loss.ok()) {
      absl::StrAppend(&metrics, absl::StrFormat("  log_loss %.4f", *log_loss));
    }
  }
  // End to end, and the model alone (what a serving runtime measures).
  absl::StrAppend(&metrics, absl::StrFormat("  model %.0f ex/s  %.0f ex/s",
                                            n / std::max(forward_secs, 1e-9),
                                            n / std::max(secs, 1e-9)));
  std::fprintf(stderr, "%s\n", metrics.c_str());
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Predicts examples with a trained model from a checkpoint, on the CPU");
  tessera::ParseCommandLineOrExit(&argc, &argv);
  return tessera::Run();
}
