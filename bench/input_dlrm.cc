#include "bench/input_dlrm.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/job_file.h"
#include "common/model/model_presets.h"
#include "data/criteo/criteo_reader.h"
#include "data/stream/example_layout.h"
#include "data/stream/file_assignment.h"
#include "data/stream/stream_reader.h"
#include "tools/convert/example_converter.h"
#include "tools/ctr_gen/ctr_generator.h"
#include "tools/local_train/local_trainer.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace tessera {
namespace {

double Seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double CpuSeconds() {
  timespec t = {};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Run {
  double wall = 0, cpu = 0;  // seconds
  double loss = 0;           // summed over the steps
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// What the two runs share: the job, the examples in memory, the stream.
struct Setup {
  JobConfig job;
  ModelDef model;
  std::unique_ptr<ExampleSet> memory;
  ExampleSchema schema;
  StreamShard shard;
  StreamOptions stream;
  std::vector<int64_t> order;  // example per position of the stream's pass
  int64_t batch = 0;
};

// Steps over positions [0, examples) of the pass, each batch from
// `next(first, count, batch)`, on a fresh trainer (empty growing tables).
template <typename Next>
absl::StatusOr<Run> TimeSteps(const Setup& setup, Next next) {
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<LocalTrainer>> trainer =
      LocalTrainer::Create(setup.job, &cpu);
  if (!trainer.ok()) return trainer.status();
  const int64_t size = static_cast<int64_t>(setup.order.size());
  Run run;
  HostBatch batch;
  const double wall = Seconds(), cpu_start = CpuSeconds();
  for (int64_t at = 0; at < size; at += setup.batch) {
    const int64_t n = std::min(setup.batch, size - at);
    if (absl::Status s = next(at, n, &batch); !s.ok()) return s;
    absl::StatusOr<GraphResult> r = (*trainer)->TrainBatch(batch);
    if (!r.ok()) return r.status();
    run.loss += r->loss_sum;
  }
  run.wall = Seconds() - wall;
  run.cpu = CpuSeconds() - cpu_start;
  return run;
}

absl::StatusOr<Run> FromMemory(const Setup& setup) {
  return TimeSteps(setup, [&](int64_t at, int64_t n, HostBatch* batch) {
    return setup.memory->Gather(absl::MakeConstSpan(setup.order.data() + at, n),
                                batch);
  });
}

absl::StatusOr<Run> FromStream(const Setup& setup) {
  // Opened inside the timed loop's first step: filling the shuffle buffer
  // is part of a pass.
  std::unique_ptr<StreamReader> reader;
  return TimeSteps(
      setup, [&](int64_t, int64_t n, HostBatch* batch) -> absl::Status {
        if (reader == nullptr) {
          absl::StatusOr<std::unique_ptr<StreamReader>> opened =
              StreamReader::Open(setup.schema, setup.shard, setup.stream, 0);
          if (!opened.ok()) return opened.status();
          reader = *std::move(opened);
        }
        absl::StatusOr<int64_t> taken = reader->Next(n, batch);
        if (!taken.ok()) return taken.status();
        if (*taken != n) {
          return absl::InternalError(absl::StrCat(
              "the stream ended after ", *taken, " of ", n, " examples"));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<Setup> Prepare(const DlrmReaderCostOptions& options,
                              const std::string& dir) {
  CtrGeneratorOptions gen;
  gen.train_examples = options.examples;
  gen.test_examples = 100;
  gen.vocab_size = 20000;
  gen.zipf_s = 1.2;
  absl::StatusOr<CtrGeneratorSummary> generated = GenerateCtrFiles(gen, dir);
  if (!generated.ok()) return generated.status();
  absl::StatusOr<CtrDataset> loaded = LoadCriteo(generated->train_path);
  if (!loaded.ok()) return loaded.status();
  ConvertOptions convert;
  convert.prefix = dir + "/train";
  absl::StatusOr<std::vector<std::string>> files = ConvertCtr(*loaded, convert);
  if (!files.ok()) return files.status();

  Setup setup;
  absl::StatusOr<JobConfig> job = ReadJobFile(options.job_file);
  if (!job.ok()) return job.status();
  setup.job = *std::move(job);
  // The trainer's own data set goes unused (steps get their batches): one
  // example of each.
  DataConfig* data = setup.job.mutable_data();
  data->set_format("criteo");
  data->set_train_path(generated->train_path);
  data->set_test_path(generated->test_path);
  data->set_train_examples(1);
  data->set_test_examples(1);
  absl::StatusOr<ModelDef> model = JobModel(setup.job);
  if (!model.ok()) return model.status();
  setup.model = *std::move(model);
  setup.batch = std::max(1, setup.job.schedule().batch_size());

  DataConfig criteo;
  criteo.set_format("criteo");
  criteo.set_train_path(generated->train_path);
  absl::StatusOr<std::unique_ptr<ExampleSet>> memory =
      LoadExamples(criteo, setup.model, true, 0, loaded->size);
  if (!memory.ok()) return memory.status();
  setup.memory = *std::move(memory);

  DataConfig tfrecord;
  tfrecord.set_format("tfrecord");
  tfrecord.set_label_feature("label");
  absl::StatusOr<ExampleSchema> schema = ExampleSchemaOf(setup.model, tfrecord);
  if (!schema.ok()) return schema.status();
  setup.schema = *std::move(schema);
  absl::StatusOr<StreamShard> shard =
      RecordRange(*files, {loaded->size}, 0, loaded->size);
  if (!shard.ok()) return shard.status();
  setup.shard = *std::move(shard);
  absl::StatusOr<StreamOptions> stream =
      StreamOptionsOf(tfrecord, StreamSeed(setup.job.schedule().seed(), 0), 0);
  if (!stream.ok()) return stream.status();
  setup.stream = *std::move(stream);
  // One slice in file order: record r of the pass is example r.
  setup.order = StreamOrder(loaded->size, setup.stream);
  return setup;
}

}  // namespace

absl::Status RunDlrmReaderCost(const DlrmReaderCostOptions& options) {
  const std::string dir = absl::StrCat(options.dir, "/bench_input_dlrm");
  std::filesystem::create_directories(dir);
  absl::StatusOr<Setup> setup = Prepare(options, dir);
  if (!setup.ok()) {
    std::filesystem::remove_all(dir);
    return setup.status();
  }
  std::vector<double> memory_rate, stream_rate, memory_cpu, stream_cpu;
  double memory_loss = 0, stream_loss = 0;
  const double n = static_cast<double>(setup->order.size());
  absl::Status status;
  for (int r = 0; r < std::max(1, options.rounds) && status.ok(); ++r) {
    // Alternated, so that a change in the machine's load hits both.
    absl::StatusOr<Run> memory = FromMemory(*setup);
    absl::StatusOr<Run> stream =
        memory.ok() ? FromStream(*setup) : memory.status();
    if (!stream.ok()) {
      status = stream.status();
      break;
    }
    memory_rate.push_back(n / memory->wall);
    stream_rate.push_back(n / stream->wall);
    memory_cpu.push_back(1e6 * memory->cpu / n);
    stream_cpu.push_back(1e6 * stream->cpu / n);
    memory_loss = memory->loss;
    stream_loss = stream->loss;
  }
  std::filesystem::remove_all(dir);
  if (!status.ok()) return status;
  if (std::abs(memory_loss - stream_loss) > 1e-5 * std::abs(memory_loss)) {
    return absl::InternalError(
        absl::StrCat("the runs trained different batches: loss ", memory_loss,
                     " from memory, ", stream_loss, " from the stream"));
  }
  const double memory = Median(memory_rate), stream = Median(stream_rate);
  const double memory_best =
      *std::max_element(memory_rate.begin(), memory_rate.end());
  const double stream_best =
      *std::max_element(stream_rate.begin(), stream_rate.end());
  std::printf(
      "\nDLRM job (%s) worker steps on the CPU backend, batch %lld, %lld "
      "examples a run,\nsame batches both ways (mean loss %.6f), %d "
      "alternated runs of each:\n",
      options.job_file.c_str(), static_cast<long long>(setup->batch),
      static_cast<long long>(setup->order.size()), memory_loss / n,
      static_cast<int>(memory_rate.size()));
  std::printf("%-44s %12s %12s %16s\n", "examples", "examples/s", "best ex/s",
              "CPU us/example");
  std::printf("%-44s %12.0f %12.0f %16.1f\n", "in memory (ExampleSet::Gather)",
              memory, memory_best, Median(memory_cpu));
  std::printf("%-44s %12.0f %12.0f %16.1f\n",
              "streamed from TFRecord (StreamReader::Next)", stream,
              stream_best, Median(stream_cpu));
  // Medians are what a run sees; the best runs are the least disturbed by
  // other load on a shared machine.
  std::printf(
      "reader cost: %.1f%% of the DLRM worker's step rate (medians; best "
      "runs: %.1f%%; target: under 5%%)\n",
      100.0 * (1.0 - stream / memory),
      100.0 * (1.0 - stream_best / memory_best));
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace tessera
