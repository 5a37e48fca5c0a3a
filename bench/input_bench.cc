// bench/input: reading and parsing a Criteo-like example (13 floats, 26
// ids, a label) per format on one core: TFRecord of tf.train.Example plain
// and gzip, CSV, and Criteo TSV through the in-memory loader. Prints
// records/s and MB/s of the uncompressed record bytes (and of the file),
// and the stream reader's rate with its read-ahead thread. Rates are per
// CPU second of the process (one core's worth, whatever else the machine
// runs); the last column is MB/s of wall time. Then the DLRM job's worker
// step rate with its examples in memory against streamed from TFRecord
// (bench/input_dlrm.h), in wall-clock examples/s.
//
//   bench_input [--records=200000] [--dir=/tmp] [--dlrm_examples=40000]
//   bench_input --mode=dlrm    # the DLRM line alone
//   bench_input --mode=memory [--memory_records=400000]

#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "bench/input_dlrm.h"
#include "common/counter_rng.h"
#include "data/criteo/criteo_reader.h"
#include "data/records/csv_parser.h"
#include "data/records/example_parser.h"
#include "data/records/record_reader.h"
#include "data/stream/example_layout.h"
#include "data/stream/file_assignment.h"
#include "data/stream/stream_reader.h"
#include "tools/convert/example_converter.h"

DEFINE_int64(records, 200000, "Examples per file.");
DEFINE_string(dir, "/tmp", "Where the bench writes its files.");
DEFINE_string(mode, "rates",
              "rates: the table of formats, then the DLRM job's step rate "
              "with and without the reader; dlrm: that line alone; memory: a "
              "worker's memory while streaming --memory_records examples "
              "from 8 TFRecord files.");
DEFINE_int64(memory_records, 400000, "memory mode: examples streamed.");
DEFINE_string(dlrm_job, "deploy/jobs/dlrm.textproto",
              "The DLRM job file whose worker steps are timed with examples "
              "in memory and streamed.");
DEFINE_int64(dlrm_examples, 40000, "Examples per DLRM run.");
DEFINE_int32(dlrm_rounds, 5,
             "DLRM runs of each kind, alternated; median and best shown.");

namespace tessera {
namespace {

constexpr int kDense = 13;
constexpr int kFields = 26;

double Seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU time of the whole process (all its threads): on a shared machine the
// per-core rate is records over CPU seconds, not over wall seconds.
double CpuSeconds() {
  timespec t = {};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// CPU time of the calling thread.
double ThreadCpuSeconds() {
  timespec t = {};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A timed section: wall and CPU seconds.
struct Timer {
  double wall = Seconds();
  double cpu = CpuSeconds();
};

// Criteo-like examples: heavy-tailed counts, 64-bit ids, clicks.
CtrDataset MakeData(int64_t n) {
  CtrDataset data;
  data.num_dense = kDense;
  data.num_fields = kFields;
  data.size = n;
  data.fields.resize(kFields);
  for (int64_t i = 0; i < n; ++i) {
    data.labels.push_back(CounterHash(1, i) % 4 == 0 ? 1.0f : 0.0f);
    for (int j = 0; j < kDense; ++j) {
      data.dense.push_back(CriteoDenseValue(
          static_cast<int64_t>(CounterHash(2, i * kDense + j) % 1000)));
    }
    for (int f = 0; f < kFields; ++f) {
      data.fields[f].ids.push_back(
          static_cast<int64_t>(CounterHash(3, i * kFields + f) >> 32));
      data.fields[f].offsets.push_back(
          static_cast<uint32_t>(data.fields[f].ids.size()));
    }
  }
  return data;
}

// The DLRM-style model of these examples.
ModelDef MakeModel() {
  ModelDef model;
  for (int f = 0; f < kFields; ++f) {
    InputDef* in = model.add_inputs();
    in->set_name(absl::StrCat("C", f + 1));
    in->mutable_sparse()->set_max_hotness(1);
  }
  InputDef* dense = model.add_inputs();
  dense->set_name("dense");
  dense->mutable_dense()->add_shape(kDense);
  model.mutable_label()->set_kind(LabelDef::BINARY);
  return model;
}

int64_t FileBytes(const std::string& path) {
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

// Rates per CPU second (one core's worth), and the wall-clock MB/s.
void Row(const char* name, int64_t records, int64_t record_bytes,
         int64_t file_bytes, const Timer& timer) {
  const double cpu = CpuSeconds() - timer.cpu;
  const double wall = Seconds() - timer.wall;
  std::printf("%-26s %10.0f %10.1f %10.1f %10.1f\n", name, records / cpu,
              record_bytes / cpu / 1e6, file_bytes / cpu / 1e6,
              record_bytes / wall / 1e6);
  std::fflush(stdout);
}

// Reads and parses every record of `path` in this thread.
absl::Status TimeParse(const char* name, const std::string& format,
                       const std::string& path, const ExampleSchema& schema,
                       const CsvOptions& csv) {
  const Timer timer;
  absl::StatusOr<std::unique_ptr<RecordReader>> reader =
      OpenRecordReader(format, path, csv);
  if (!reader.ok()) return reader.status();
  ExampleParser examples(schema);
  std::unique_ptr<CsvParser> lines;
  if (format == "csv") {
    absl::StatusOr<std::unique_ptr<CsvParser>> p =
        CsvParser::Create(schema, csv, (*reader)->header());
    if (!p.ok()) return p.status();
    lines = *std::move(p);
  }
  ParsedExample parsed;
  int64_t records = 0, bytes = 0;
  absl::string_view record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    absl::Status s = lines != nullptr ? lines->Parse(record, &parsed)
                                      : examples.Parse(record, &parsed);
    if (!s.ok()) return s;
    ++records;
    // TFRecord framing counts: it is read and checked too.
    bytes += static_cast<int64_t>(record.size()) + (format == "csv" ? 1 : 16);
  }
  Row(name, records, bytes, FileBytes(path), timer);
  return absl::OkStatus();
}

// The stream reader (read-ahead thread, shuffle buffer, batches of 512).
absl::Status TimeStream(const char* name, const std::string& path,
                        const ExampleSchema& schema, const DataConfig& data,
                        double* trainer_us) {
  absl::StatusOr<int64_t> count =
      CountRecords(data.format(), path, CsvOptions());
  if (!count.ok()) return count.status();
  absl::StatusOr<StreamShard> shard = RecordRange({path}, {*count}, 0, *count);
  if (!shard.ok()) return shard.status();
  absl::StatusOr<StreamOptions> options = StreamOptionsOf(data, 7, 0);
  if (!options.ok()) return options.status();
  const Timer timer;
  auto reader = StreamReader::Open(schema, *shard, *options, 0);
  if (!reader.ok()) return reader.status();
  HostBatch batch;
  int64_t records = 0;
  // The training thread's share: Next, without the waits for the thread.
  double trainer = 0;
  while (true) {
    const double t = ThreadCpuSeconds();
    absl::StatusOr<int64_t> n = (*reader)->Next(512, &batch);
    trainer += ThreadCpuSeconds() - t;
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    records += batch.size;
  }
  Row(name, records, FileBytes(path), FileBytes(path), timer);
  *trainer_us = 1e6 * trainer / static_cast<double>(records);
  return absl::OkStatus();
}

// A /proc/self/status field in kB ("VmRSS", "VmHWM").
int64_t StatusKb(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::atoll(line.c_str() + field.size() + 1);
    }
  }
  return -1;
}

// Streams a data set many times the reader's buffers and reports how much
// the peak resident memory grew while doing it.
absl::Status RunMemory() {
  const std::string dir = absl::StrCat(FLAGS_dir, "/bench_input_memory");
  std::filesystem::create_directories(dir);
  constexpr int kFiles = 8;
  std::vector<std::string> files;
  std::vector<int64_t> counts;
  int64_t bytes = 0;
  for (int k = 0; k < kFiles; ++k) {
    // Distinct examples per file, generated one file at a time.
    CtrDataset data = MakeData(FLAGS_memory_records / kFiles);
    for (int64_t& id : data.fields[0].ids) id += k;
    ConvertOptions options;
    options.prefix = absl::StrCat(dir, "/part", k);
    absl::StatusOr<std::vector<std::string>> written =
        ConvertCtr(data, options);
    if (!written.ok()) return written.status();
    files.push_back((*written)[0]);
    counts.push_back(data.size);
    bytes += FileBytes(files.back());
  }
  malloc_trim(0);
  // Resets VmHWM to the current RSS (Linux 4.0 and later).
  std::ofstream("/proc/self/clear_refs") << "5";
  const int64_t before = StatusKb("VmRSS");
  DataConfig config;
  config.set_format("tfrecord");
  config.set_label_feature("label");
  absl::StatusOr<ExampleSchema> schema = ExampleSchemaOf(MakeModel(), config);
  if (!schema.ok()) return schema.status();
  absl::StatusOr<std::vector<StreamShard>> shards =
      AssignFiles(files, counts, 1);
  if (!shards.ok()) return shards.status();
  absl::StatusOr<StreamOptions> options = StreamOptionsOf(config, 7, 0);
  if (!options.ok()) return options.status();
  const Timer timer;
  auto reader = StreamReader::Open(*schema, (*shards)[0], *options, 0);
  if (!reader.ok()) return reader.status();
  HostBatch batch;
  int64_t records = 0;
  while (true) {
    absl::StatusOr<int64_t> n = (*reader)->Next(512, &batch);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    records += batch.size;
  }
  reader->reset();
  const int64_t peak = StatusKb("VmHWM");
  std::printf(
      "streamed %lld examples, %.1f MB in %d TFRecord files, shuffle_buffer "
      "%lld, read_ahead %lld\n",
      static_cast<long long>(records), bytes / 1e6, kFiles,
      static_cast<long long>(options->shuffle_buffer),
      static_cast<long long>(options->read_ahead));
  std::printf(
      "resident memory %.1f MB before, peak %.1f MB while streaming: +%.1f MB "
      "(%.1fx less than the data)\n",
      before / 1024.0, peak / 1024.0, (peak - before) / 1024.0,
      bytes / 1e6 / std::max((peak - before) / 1024.0, 0.001));
  Row("tfrecord StreamReader", records, bytes, bytes, timer);
  std::filesystem::remove_all(dir);
  return absl::OkStatus();
}

absl::Status RunDlrm() {
  DlrmReaderCostOptions options;
  options.job_file = FLAGS_dlrm_job;
  options.dir = FLAGS_dir;
  options.examples = FLAGS_dlrm_examples;
  options.rounds = FLAGS_dlrm_rounds;
  return RunDlrmReaderCost(options);
}

absl::Status Run() {
  if (FLAGS_mode == "memory") return RunMemory();
  if (FLAGS_mode == "dlrm") return RunDlrm();
  if (FLAGS_mode != "rates") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mode=", FLAGS_mode, ": expected rates, dlrm or memory"));
  }
  const std::string dir = absl::StrCat(FLAGS_dir, "/bench_input");
  std::filesystem::create_directories(dir);
  const CtrDataset data = MakeData(FLAGS_records);
  const ModelDef model = MakeModel();
  DataConfig config;
  config.set_format("tfrecord");
  config.set_label_feature("label");
  absl::StatusOr<ExampleSchema> schema = ExampleSchemaOf(model, config);
  if (!schema.ok()) return schema.status();

  ConvertOptions options;
  options.prefix = dir + "/plain";
  auto plain = ConvertCtr(data, options);
  if (!plain.ok()) return plain.status();
  options.prefix = dir + "/gzip";
  options.gzip = true;
  auto gzip = ConvertCtr(data, options);
  if (!gzip.ok()) return gzip.status();
  options.prefix = dir + "/text";
  options.gzip = false;
  options.output_format = "csv";
  auto csv = ConvertCtr(data, options);
  if (!csv.ok()) return csv.status();
  // Criteo TSV: label, 13 integers, 26 hex ids.
  const std::string tsv = dir + "/criteo.tsv";
  {
    std::ofstream out(tsv);
    for (int64_t i = 0; i < data.size; ++i) {
      out << static_cast<int>(data.labels[i]);
      for (int j = 0; j < kDense; ++j) {
        out << '\t' << CounterHash(2, i * kDense + j) % 1000;
      }
      char hex[20];
      for (int f = 0; f < kFields; ++f) {
        std::snprintf(hex, sizeof(hex), "\t%llx",
                      static_cast<unsigned long long>(data.fields[f].ids[i]));
        out << hex;
      }
      out << '\n';
    }
  }

  std::printf("%d examples per file (13 floats, 26 ids, label), one core\n",
              static_cast<int>(data.size));
  std::printf("%-26s %10s %10s %10s %10s\n", "format", "records/s", "MB/s",
              "file MB/s", "wall MB/s");
  CsvOptions csv_options;
  csv_options.sparse_type = "int";
  if (absl::Status s =
          TimeParse("tfrecord", "tfrecord", (*plain)[0], *schema, csv_options);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = TimeParse("tfrecord gzip", "tfrecord", (*gzip)[0],
                                 *schema, csv_options);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = TimeParse("csv", "csv", (*csv)[0], *schema, csv_options);
      !s.ok()) {
    return s;
  }
  {
    const Timer timer;
    absl::StatusOr<CtrDataset> loaded = LoadCriteo(tsv);
    if (!loaded.ok()) return loaded.status();
    Row("criteo tsv (LoadCriteo)", loaded->size, FileBytes(tsv), FileBytes(tsv),
        timer);
  }
  double stream_us = 0, unshuffled_us = 0;
  if (absl::Status s = TimeStream("tfrecord StreamReader", (*plain)[0], *schema,
                                  config, &stream_us);
      !s.ok()) {
    return s;
  }
  config.set_shuffle_buffer(1);
  if (absl::Status s = TimeStream("  same, shuffle_buffer 1", (*plain)[0],
                                  *schema, config, &unshuffled_us);
      !s.ok()) {
    return s;
  }
  // What a training step pays to assemble its batch: from memory (the
  // Criteo set loaded, random examples) or from the stream (parsing is on
  // the read-ahead thread).
  {
    DataConfig criteo;
    criteo.set_format("criteo");
    criteo.set_train_path(tsv);
    absl::StatusOr<std::unique_ptr<ExampleSet>> set =
        LoadExamples(criteo, model, true, 0, data.size);
    if (!set.ok()) return set.status();
    HostBatch batch;
    std::vector<int64_t> ids(512);
    const double t = ThreadCpuSeconds();
    for (int64_t at = 0; at + 512 <= data.size; at += 512) {
      for (int64_t i = 0; i < 512; ++i) {
        ids[i] = static_cast<int64_t>(CounterHash(9, at + i) %
                                      static_cast<uint64_t>(data.size));
      }
      if (absl::Status s = (*set)->Gather(ids, &batch); !s.ok()) return s;
    }
    const double gather_us = 1e6 * (ThreadCpuSeconds() - t) /
                             static_cast<double>(data.size / 512 * 512);
    std::printf(
        "training thread per example, batches of 512: in memory (Gather) "
        "%.2f us, stream (Next) %.2f us, unshuffled stream %.2f us\n",
        gather_us, stream_us, unshuffled_us);
  }
  rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak RSS %ld MB (the bench holds the data set in memory too)\n",
              usage.ru_maxrss / 1024);
  std::filesystem::remove_all(dir);
  return RunDlrm();
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::BenchMain(argc, argv, "bench_input",
                            "Input formats' read and parse rates.",
                            tessera::Run);
}
