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

absl::Status CheckFlags() {
  if (FLAGS_checkpoint.empty()) {
    return absl::InvalidArgumentError("--checkpoint is required");
  }
  if (FLAGS_output_format != "csv" && FLAGS_output_format != "jsonl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--output_format: '", FLAGS_output_format,
                     "' is neither jsonl nor csv"));
  }
  if (FLAGS_split != "test" && FLAGS_split != "train") {
    return absl::InvalidArgumentError(
        absl::StrCat("--split: '", FLAGS_split, "' is neither test nor train"));
  }
  if (FLAGS_batch_size < 1) {
    return absl::InvalidArgumentError("--batch_size must be >= 1");
  }
  // 0 would print metrics over no examples, as if the model scored 0.
  if (FLAGS_max_examples < 1 && FLAGS_max_examples != -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_examples must be a number of examples >= 1 (or "
                     "-1: all of them), got ",
                     FLAGS_max_examples));
  }
  if (FLAGS_threads < 0 || FLAGS_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads must be between 0 (one per core) and 1024, "
                     "got ",
                     FLAGS_threads));
  }
  return absl::OkStatus();
}

// The job's data, pointed at --data_dir's or --examples' files; *train
// says whether the examples are the data's training split.
absl::StatusOr<DataConfig> DataToPredict(const TrainedModel& model,
                                         bool* train) {
  DataConfig data = model.job.data();
  if (!FLAGS_data_dir.empty()) SetDataDir(FLAGS_data_dir, &data);
  // The whole file: the cap a training run set is no reason to predict
  // fewer (--max_examples is).
  data.set_train_examples(0);
  data.set_test_examples(0);
  *train = FLAGS_split == "train";
  const bool criteo = DataFormatNamed(data.format()) == DataFormat::kCriteo;
  if (!FLAGS_labels.empty() && (FLAGS_examples.empty() || criteo)) {
    return absl::InvalidArgumentError(
        "--labels goes with --examples, for IDX images (a "
        "Criteo file's label is its first column)");
  }
  if (!FLAGS_examples.empty()) {
    *train = false;
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
        *train ? data.mutable_train_labels() : data.mutable_test_labels();
    if (!std::filesystem::exists(*labels)) labels->clear();
  }
  return data;
}

// The predictors of the threads: a graph runs one batch at a time, so each
// thread has its own, all of them reading the one copy of the tables.
struct PredictorPool {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Predictor>> predictors;
};

absl::StatusOr<PredictorPool> MakePredictorPool(const TrainedModel& model) {
  absl::StatusOr<DeviceChoice> device = ChooseDeviceForFlag(FLAGS_device);
  if (!device.ok()) return device.status();
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(*device);
  if (!backend.ok()) return backend.status();
  std::fprintf(stderr, "tessera_predict: on %s (%s)\n", device->device.c_str(),
               device->reason.c_str());
  const int threads =
      device->cuda
          ? 1
          : std::max(
                1, FLAGS_threads > 0
                       ? FLAGS_threads
                       : static_cast<int>(std::thread::hardware_concurrency()));
  PredictorPool pool;
  pool.backends.push_back(*std::move(backend));
  for (int t = 0; t < threads; ++t) {
    if (t > 0) {
      absl::StatusOr<std::unique_ptr<Backend>> more = MakeBackend(*device);
      if (!more.ok()) return more.status();
      pool.backends.push_back(*std::move(more));
    }
    absl::StatusOr<std::unique_ptr<Predictor>> p =
        Predictor::Create(model, pool.backends.back().get());
    if (!p.ok()) return p.status();
    pool.predictors.push_back(*std::move(p));
  }
  return pool;
}

absl::StatusOr<std::FILE*> OpenForWriting(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  }
  return file;
}

// Where the lines go.
struct Output {
  PredictionLayout layout;
  std::FILE* predictions = stdout;
  std::FILE* inputs = nullptr;  // --write_inputs' file, when given
};

absl::Status CloseOutput(const Output& output) {
  if (output.inputs != nullptr && std::fclose(output.inputs) != 0) {
    return absl::DataLossError(
        absl::StrCat("cannot write ", FLAGS_write_inputs));
  }
  if (output.predictions != stdout && std::fclose(output.predictions) != 0) {
    return absl::DataLossError(absl::StrCat("cannot write ", FLAGS_output));
  }
  return absl::OkStatus();
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

void PredictSlot(const ExampleSet& examples, Predictor& predictor, Slot* slot) {
  slot->indices.resize(slot->size);
  std::iota(slot->indices.begin(), slot->indices.end(), slot->at);
  if (absl::Status s = examples.Gather(slot->indices, &slot->batch); !s.ok()) {
    slot->result = s;
    return;
  }
  const auto forward_start = std::chrono::steady_clock::now();
  slot->result = predictor.Predict(slot->batch, &slot->outputs);
  slot->secs = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                             forward_start)
                   .count();
}

// Predicts the batches from example `round_at` on, one per thread, and
// returns how many slots they filled.
int PredictRound(int64_t round_at, int64_t n, const ExampleSet& examples,
                 const PredictorPool& pool, std::vector<Slot>* slots) {
  const int threads = static_cast<int>(slots->size());
  int k = 0;
  for (; k < threads && round_at + k * FLAGS_batch_size < n; ++k) {
    (*slots)[k].at = round_at + k * FLAGS_batch_size;
    (*slots)[k].size = std::min<int64_t>(FLAGS_batch_size, n - (*slots)[k].at);
  }
  std::vector<std::thread> workers;
  for (int i = 1; i < k; ++i) {
    workers.emplace_back(
        [&, i] { PredictSlot(examples, *pool.predictors[i], &(*slots)[i]); });
  }
  PredictSlot(examples, *pool.predictors[0], &(*slots)[0]);
  for (std::thread& t : workers) t.join();
  return k;
}

// What the metrics line needs of all the batches.
struct Totals {
  std::vector<float> probabilities, labels;  // binary labeled models only
  double loss_sum = 0, forward_secs = 0;
  int64_t correct = 0;
};

// Writes the predictions of the first k slots and adds them to *totals.
absl::Status WriteRound(const std::vector<Slot>& slots, int k,
                        const TrainedModel& model, const Predictor& first,
                        const Output& output, bool keep_scores,
                        Totals* totals) {
  const int64_t width = output.layout.width;
  std::string line;
  for (int i = 0; i < k; ++i) {
    const Slot& slot = slots[i];
    if (!slot.result.ok()) return slot.result.status();
    const HostBatch& batch = slot.batch;
    const std::vector<float>& outputs = slot.outputs;
    totals->loss_sum += slot.result->loss_sum;
    totals->correct += slot.result->correct;
    if (keep_scores) {
      totals->probabilities.insert(totals->probabilities.end(), outputs.begin(),
                                   outputs.end());
      totals->labels.insert(totals->labels.end(), batch.labels.begin(),
                            batch.labels.end());
    }
    for (int64_t b = 0; b < slot.size; ++b) {
      line.clear();
      AppendPrediction(output.layout, slot.at + b,
                       absl::MakeConstSpan(outputs.data() + b * width, width),
                       &line);
      std::fwrite(line.data(), 1, line.size(), output.predictions);
      if (output.inputs != nullptr) {
        line.clear();
        AppendOnnxInputs(model.model, batch, b, slot.at + b, first, &line);
        std::fwrite(line.data(), 1, line.size(), output.inputs);
      }
    }
  }
  return absl::OkStatus();
}

// Predicts and writes examples [0, n), with a progress line on stderr.
absl::StatusOr<Totals> PredictAll(int64_t n, const ExampleSet& examples,
                                  const TrainedModel& model,
                                  const PredictorPool& pool,
                                  const Output& output, bool keep_scores) {
  const int threads = static_cast<int>(pool.predictors.size());
  std::vector<Slot> slots(threads);
  Totals totals;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  // Redrawn on a terminal; plain lines in a log file or a Slurm output.
  ProgressLine progress(stderr);
  const int64_t round = static_cast<int64_t>(threads) * FLAGS_batch_size;
  for (int64_t round_at = 0; round_at < n; round_at += round) {
    const int k = PredictRound(round_at, n, examples, pool, &slots);
    double round_secs = 0;
    for (int i = 0; i < k; ++i) {
      round_secs = std::max(round_secs, slots[i].secs);
    }
    totals.forward_secs += round_secs;
    if (absl::Status s = WriteRound(slots, k, model, *pool.predictors[0],
                                    output, keep_scores, &totals);
        !s.ok()) {
      return s;
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
  progress.Finish();
  return totals;
}

// The metrics training prints for its test set, when there are labels,
// and the speeds.
std::string MetricsLine(int64_t n, const TrainedModel& model,
                        const PredictionLayout& layout, bool labeled,
                        bool binary, const Totals& totals, double secs) {
  const int64_t total = std::max<int64_t>(1, n);
  std::string metrics =
      absl::StrCat("tessera_predict: ", n, " examples, checkpoint after ",
                   model.global_step, " worker steps");
  if (!labeled) {
    absl::StrAppend(&metrics, "  no labels, so no metrics");
  } else {
    absl::StrAppend(
        &metrics, LabeledMetrics(layout, totals.loss_sum / total,
                                 static_cast<double>(totals.correct) / total));
  }
  if (binary && labeled && !totals.probabilities.empty()) {
    absl::StatusOr<double> auc = RocAuc(totals.probabilities, totals.labels);
    if (auc.ok())
      absl::StrAppend(&metrics, absl::StrFormat("  auc %.4f", *auc));
    absl::StatusOr<double> log_loss =
        LogLoss(totals.probabilities, totals.labels);
    if (log_loss.ok()) {
      absl::StrAppend(&metrics, absl::StrFormat("  log_loss %.4f", *log_loss));
    }
  }
  // End to end, and the model alone (what a serving runtime measures).
  absl::StrAppend(&metrics,
                  absl::StrFormat("  model %.0f ex/s  %.0f ex/s",
                                  n / std::max(totals.forward_secs, 1e-9),
                                  n / std::max(secs, 1e-9)));
  return metrics;
}

int Run() {
  if (absl::Status s = CheckFlags(); !s.ok()) return Fail(s);
  absl::StatusOr<TrainedModel> model = LoadTrainedModel(FLAGS_checkpoint);
  if (!model.ok()) return Fail(model.status());
  bool train = false;
  absl::StatusOr<DataConfig> data = DataToPredict(*model, &train);
  if (!data.ok()) return Fail(data.status());
  absl::StatusOr<int64_t> count = CountExamples(*data, train);
  if (!count.ok()) return Fail(count.status());
  int64_t n = *count;
  if (FLAGS_max_examples >= 0) n = std::min(n, FLAGS_max_examples);
  absl::StatusOr<std::unique_ptr<ExampleSet>> examples =
      LoadExamples(*data, model->model, train, 0, n, LabelUse::kOptional);
  if (!examples.ok()) return Fail(examples.status());
  const bool labeled = (*examples)->has_labels();
  absl::StatusOr<PredictorPool> pool = MakePredictorPool(*model);
  if (!pool.ok()) return Fail(pool.status());

  const LossDef::Kind loss = model->model.loss().kind();
  Output output;
  output.layout.format = FLAGS_output_format == "csv"
                             ? PredictionFormat::kCsv
                             : PredictionFormat::kJsonLines;
  output.layout.classes = loss != LossDef::MEAN_SQUARED_ERROR;
  output.layout.width = pool->predictors[0]->output_size();
  const bool binary = model->model.label().kind() == LabelDef::BINARY &&
                      output.layout.width == 1 &&
                      loss == LossDef::SIGMOID_CROSS_ENTROPY;
  if (FLAGS_output != "-") {
    absl::StatusOr<std::FILE*> file = OpenForWriting(FLAGS_output);
    if (!file.ok()) return Fail(file.status());
    output.predictions = *file;
  }
  if (output.layout.format == PredictionFormat::kCsv) {
    std::fprintf(output.predictions, "%s\n",
                 PredictionHeader(output.layout).c_str());
  }
  if (!FLAGS_write_inputs.empty()) {
    absl::StatusOr<std::FILE*> file = OpenForWriting(FLAGS_write_inputs);
    if (!file.ok()) return Fail(file.status());
    output.inputs = *file;
  }

  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Totals> totals =
      PredictAll(n, **examples, *model, *pool, output, binary && labeled);
  if (!totals.ok()) return Fail(totals.status());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (absl::Status s = CloseOutput(output); !s.ok()) return Fail(s);
  std::fprintf(
      stderr, "%s\n",
      MetricsLine(n, *model, output.layout, labeled, binary, *totals, secs)
          .c_str());
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
