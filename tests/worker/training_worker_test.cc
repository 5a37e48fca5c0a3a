// TrainingWorker on MNIST-format files in a temporary directory, in mirrored
// mode over a one-rank all-reducer, so that no parameter server is needed.
#include "worker/training_worker.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/byte_codec.h"
#include "common/cluster/cluster_spec.h"
#include "common/model/model_presets.h"
#include "data/idx/mnist_dataset.h"
#include "data/stream/file_assignment.h"
#include "data/stream/stream_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/idx/idx_test_files.h"
#include "tests/skip_unless_required.h"
#include "tools/convert/example_converter.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/collective/all_reducer.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using idx_test::Bytes;
using idx_test::Ubyte;

// The only rank of its group: the sum is the buffer itself.
class OneRank final : public AllReducer {
 public:
  int rank() const override { return 0; }
  int num_ranks() const override { return 1; }
  Memory memory() const override { return Memory::kHost; }
  absl::Status AllReduce(absl::Span<float>) override {
    return absl::OkStatus();
  }
};

// The only rank of a group that sums on the device, as NCCL does once
// negotiated; on the CPU backend device memory is host memory.
class OneRankOnDevice final : public AllReducer {
 public:
  int rank() const override { return 0; }
  int num_ranks() const override { return 1; }
  Memory memory() const override { return Memory::kHost; }
  absl::Status AllReduce(absl::Span<float>) override {
    ++host_calls;
    return absl::OkStatus();
  }
  bool on_device() const override { return true; }
  absl::Status AllReduceOnDevice(absl::Span<float> data,
                                 void* stream) override {
    ++device_calls;
    last = std::vector<float>(data.begin(), data.end());
    return absl::OkStatus();
  }

  int host_calls = 0, device_calls = 0;
  std::vector<float> last;  // what the last device all-reduce was given
};

// Rank 1 of 2 of a group whose members never change (as NCCL's): it
// restarts, and cannot re-form.
class FixedSecondOfTwo final : public AllReducer {
 public:
  int rank() const override { return 1; }
  int num_ranks() const override { return 2; }
  Memory memory() const override { return Memory::kHost; }
  absl::Status AllReduce(absl::Span<float>) override {
    return absl::OkStatus();
  }
  absl::Status Restart(uint64_t) override { return absl::OkStatus(); }
};

// `n` bytes that depend on `seed`, so that two data sets differ.
Bytes Pattern(int64_t n, int seed, int modulo = 256) {
  Bytes out(n);
  for (int64_t i = 0; i < n; ++i) {
    out[i] =
        static_cast<uint8_t>((i * 37 + seed * 101 + i * i * seed) % modulo);
  }
  return out;
}

class TrainingWorkerTest : public idx_test::IdxFileTest {
 protected:
  std::string Write(const std::string& name, const Bytes& bytes) {
    return WritePlain(name, bytes);
  }

  // Writes `prefix`-train-{images,labels} ([4, 2, 3]) and
  // `prefix`-test-{images,labels} (`test_dims`) with contents drawn from
  // `seed`, and sets them as config's data.
  void WriteData(const std::string& prefix, int seed,
                 const std::vector<uint32_t>& test_dims, DataConfig* data) {
    data->set_format("idx");
    data->set_train_images(Write(absl::StrCat(prefix, "-train-images"),
                                 Ubyte({4, 2, 3}, Pattern(24, seed))));
    data->set_train_labels(Write(absl::StrCat(prefix, "-train-labels"),
                                 Ubyte({4}, Pattern(4, seed + 1, 10))));
    const int64_t test_bytes =
        int64_t{test_dims[0]} * test_dims[1] * test_dims[2];
    data->set_test_images(Write(absl::StrCat(prefix, "-test-images"),
                                Ubyte(test_dims, Pattern(test_bytes, seed))));
    data->set_test_labels(
        Write(absl::StrCat(prefix, "-test-labels"),
              Ubyte({test_dims[0]}, Pattern(test_dims[0], seed + 2, 10))));
  }

  // A mirrored job of one worker: 6 inputs, `hidden` units, 10 classes.
  WorkerConfig Config(const std::string& prefix, int seed, int hidden,
                      const std::vector<uint32_t>& test_dims = {3, 2, 3}) {
    WorkerConfig config;
    config.set_worker_index(0);
    config.set_num_workers(1);
    config.set_mode("mirrored");
    config.set_seed(seed);
    ModelConfig preset;
    preset.set_kind("mlp");
    preset.set_input_dim(6);
    preset.add_hidden_units(hidden);
    preset.set_num_classes(10);
    *config.mutable_model_def() = *PresetModel(preset);
    config.mutable_optimizer()->set_learning_rate(0.1f);
    config.mutable_optimizer()->mutable_sgd();
    WriteData(prefix, seed, test_dims, config.mutable_data());
    config.set_train_begin(0);
    config.set_train_end(4);
    return config;
  }

  std::unique_ptr<TrainingWorker> MakeWorker(AllReducer* reducer = nullptr) {
    absl::StatusOr<ClusterSpec> cluster =
        ClusterSpec::FromParts({{"chief", {"127.0.0.1:1"}},
                                {"worker", {"127.0.0.1:2"}},
                                {"ps", {"127.0.0.1:3"}}},
                               TaskId{"worker", 0});
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    return std::make_unique<TrainingWorker>(
        *cluster, std::make_unique<CpuBackend>(), PsClientOptions{},
        reducer != nullptr ? reducer : &all_reducer_);
  }

  // One step over examples 0..3 of shard [0, 4).
  static StepResponse Step(TrainingWorker* worker) {
    StepRequest request;
    request.set_step(7);
    request.set_shard_begin(0);
    request.set_shard_end(4);
    const std::vector<int64_t> ids = {0, 1, 2, 3};
    request.set_example_ids(EncodeRaw<int64_t>(ids));
    StepResponse response;
    absl::Status s = worker->RunStep(request, &response);
    EXPECT_TRUE(s.ok()) << s;
    return response;
  }

  static absl::StatusOr<EvaluateResponse> Evaluate(TrainingWorker* worker,
                                                   int64_t end) {
    EvaluateRequest request;
    request.set_begin(0);
    request.set_end(end);
    EvaluateResponse response;
    if (absl::Status s = worker->Evaluate(request, &response); !s.ok()) {
      return s;
    }
    return response;
  }

  OneRank all_reducer_;
};

TEST_F(TrainingWorkerTest, EvaluatesTestImagesOfTheModelsSize) {
  std::unique_ptr<TrainingWorker> worker = MakeWorker();
  ConfigureResponse configured;
  ASSERT_TRUE(worker->Configure(Config("a", 1, 5), &configured).ok());
  absl::StatusOr<EvaluateResponse> r = Evaluate(worker.get(), 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->examples(), 3);
}

// An all-reducer that sums on the device gets the weighted gradients
// where the backward pass left them, and the replica ends exactly as
// through the host path; a replica without examples sends zeros.
TEST_F(TrainingWorkerTest, MirroredGradientsAreSummedOnTheDeviceWhenItCan) {
  OneRankOnDevice device;
  std::unique_ptr<TrainingWorker> on_device = MakeWorker(&device);
  std::unique_ptr<TrainingWorker> on_host = MakeWorker();
  ConfigureResponse configured;
  ASSERT_TRUE(on_device->Configure(Config("a", 1, 5), &configured).ok());
  ASSERT_TRUE(on_host->Configure(Config("a", 1, 5), &configured).ok());
  for (int step = 0; step < 3; ++step) {
    const StepResponse a = Step(on_device.get());
    const StepResponse b = Step(on_host.get());
    EXPECT_EQ(a.loss(), b.loss());
    EXPECT_EQ(a.replica_checksum(), b.replica_checksum()) << step;
  }
  EXPECT_EQ(device.device_calls, 3);
  EXPECT_EQ(device.host_calls, 0);
  ASSERT_FALSE(device.last.empty());
  EXPECT_EQ(device.last.back(), 4.0f) << "the weight: 4 examples";

  StepRequest empty;
  empty.set_step(8);
  empty.set_shard_begin(0);
  empty.set_shard_end(4);
  StepResponse response;
  ASSERT_TRUE(on_device->RunStep(empty, &response).ok());
  EXPECT_EQ(response.examples(), 0);
  EXPECT_EQ(device.device_calls, 4);
  EXPECT_EQ(device.last, std::vector<float>(device.last.size(), 0.0f));
}

// Test images of another size than the model's input would be read past
// their end; they are refused, naming both sizes.
TEST_F(TrainingWorkerTest, EvaluateRejectsTestImagesOfAnotherSize) {
  const std::vector<std::vector<uint32_t>> test_dims = {
      {3, 2, 2}, {3, 0, 6}, {3, 7, 1}};
  for (const std::vector<uint32_t>& dims : test_dims) {
    SCOPED_TRACE(absl::StrCat(dims[0], "x", dims[1], "x", dims[2]));
    std::unique_ptr<TrainingWorker> worker = MakeWorker();
    ConfigureResponse configured;
    ASSERT_TRUE(worker->Configure(Config("a", 1, 5, dims), &configured).ok());
    absl::StatusOr<EvaluateResponse> r = Evaluate(worker.get(), 3);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << r.status();
    EXPECT_THAT(
        r.status().message(),
        AllOf(HasSubstr(absl::StrCat("have ", dims[1] * dims[2], " pixels")),
              HasSubstr("expects 6"), HasSubstr("a-test-images")));
  }
}

// A Configure that fails on its last check (the training shard cannot be
// loaded) leaves the worker as the previous Configure made it.
TEST_F(TrainingWorkerTest, FailedConfigureChangesNothing) {
  const WorkerConfig good = Config("a", 1, 5);
  WorkerConfig bad = Config("b", 2, 7);
  // Label 12 is outside the data set's 10 classes: LoadMnist fails.
  bad.mutable_data()->set_train_labels(
      Write("b-bad-labels", Ubyte({4}, {1, 12, 3, 4})));
  bad.set_train_end(2);

  std::unique_ptr<TrainingWorker> reconfigured = MakeWorker();
  ConfigureResponse response;
  ASSERT_TRUE(reconfigured->Configure(good, &response).ok());
  absl::Status s = reconfigured->Configure(bad, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(reconfigured->configured());

  std::unique_ptr<TrainingWorker> fresh = MakeWorker();
  ASSERT_TRUE(fresh->Configure(good, &response).ok());
  const StepResponse a = Step(reconfigured.get());
  const StepResponse b = Step(fresh.get());
  EXPECT_EQ(a.examples(), 4);
  EXPECT_EQ(a.loss(), b.loss());
  EXPECT_EQ(a.replica_checksum(), b.replica_checksum());
}

// A chief's configuration (it has a collective epoch) puts a worker on the
// cluster spec's ring only through Reform: a fixed group keeps the rank and
// size it started with, so a group that does not match the job is refused
// and the error names the group's own numbers, not the spec's.
TEST_F(TrainingWorkerTest, ConfigureRefusesAFixedGroupOfAnotherSize) {
  WorkerConfig config = Config("fixed", 1, 5);
  config.set_collective_epoch(1000);
  FixedSecondOfTwo group;
  std::unique_ptr<TrainingWorker> worker = MakeWorker(&group);
  ConfigureResponse response;

  absl::Status s = worker->Configure(config, &response);

  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("started as rank 1 of 2")) << s;
  EXPECT_FALSE(worker->configured());
}

// A second Configure naming other files reads them, even for the same
// dataset shard, and drops the test set it had loaded.
TEST_F(TrainingWorkerTest, ReconfigureWithOtherFilesReadsThem) {
  const WorkerConfig first = Config("a", 1, 5, {3, 2, 3});
  const WorkerConfig second = Config("b", 2, 5, {5, 2, 3});

  std::unique_ptr<TrainingWorker> reconfigured = MakeWorker();
  ConfigureResponse response;
  ASSERT_TRUE(reconfigured->Configure(first, &response).ok());
  Step(reconfigured.get());
  ASSERT_TRUE(Evaluate(reconfigured.get(), 3).ok());
  ASSERT_TRUE(reconfigured->Configure(second, &response).ok());

  std::unique_ptr<TrainingWorker> fresh = MakeWorker();
  ASSERT_TRUE(fresh->Configure(second, &response).ok());
  const StepResponse a = Step(reconfigured.get());
  const StepResponse b = Step(fresh.get());
  EXPECT_EQ(a.loss(), b.loss());
  EXPECT_EQ(a.correct(), b.correct());
  EXPECT_EQ(a.replica_checksum(), b.replica_checksum());

  absl::StatusOr<EvaluateResponse> ea = Evaluate(reconfigured.get(), 5);
  absl::StatusOr<EvaluateResponse> eb = Evaluate(fresh.get(), 5);
  ASSERT_TRUE(ea.ok()) << ea.status();
  ASSERT_TRUE(eb.ok()) << eb.status();
  EXPECT_EQ(ea->examples(), 5);
  EXPECT_EQ(ea->loss_sum(), eb->loss_sum());
}

// The same examples as TFRecord files, streamed: a step naming stream
// positions trains exactly as the step naming the IDX examples does.
TEST_F(TrainingWorkerTest, StreamedTfRecordStepsMatchTheIdxSteps) {
  const WorkerConfig idx = Config("a", 1, 5, {3, 2, 3});
  WorkerConfig streamed = idx;
  DataConfig* data = streamed.mutable_data();
  std::vector<std::string> train_files, test_files;
  for (bool train : {true, false}) {
    absl::StatusOr<MnistDataset> set =
        LoadMnist(train ? idx.data().train_images() : idx.data().test_images(),
                  train ? idx.data().train_labels() : idx.data().test_labels());
    ASSERT_TRUE(set.ok()) << set.status();
    ConvertOptions options;
    options.prefix = absl::StrCat(dir_, train ? "/train" : "/test");
    options.shards = 2;
    options.gzip = train;
    absl::StatusOr<std::vector<std::string>> files =
        ConvertMnist(*set, options);
    ASSERT_TRUE(files.ok()) << files.status();
    (train ? train_files : test_files) = *files;
  }
  data->Clear();
  data->set_format("tfrecord");
  data->add_train_files(dir_ + "/train-*");
  data->add_test_files(dir_ + "/test-*");
  data->set_label_feature("label");
  data->set_shuffle_buffer(1);
  // What the coordinator sends: one shard of both files (a slice each).
  const std::vector<int64_t> train_counts = {2, 2}, test_counts = {1, 2};
  StreamShard* shard = streamed.add_train_shards();
  *shard = *RecordRange(train_files, train_counts, 0, 4);
  for (size_t i = 0; i < test_files.size(); ++i) {
    FileSlice* f = streamed.add_test_files();
    f->set_path(test_files[i]);
    f->set_end(test_counts[i]);
  }

  std::unique_ptr<TrainingWorker> a = MakeWorker();
  std::unique_ptr<TrainingWorker> b = MakeWorker();
  ConfigureResponse ra, rb;
  ASSERT_TRUE(a->Configure(idx, &ra).ok());
  absl::Status configured = b->Configure(streamed, &rb);
  ASSERT_TRUE(configured.ok()) << configured;
  EXPECT_EQ(rb.train_total(), 4);
  EXPECT_EQ(rb.test_examples(), 3);

  // The stream's order of pass 0 of this shard, as example indices.
  StreamOptions options;
  options.seed = StreamSeed(streamed.seed(), 0);
  options.shuffle_buffer = 1;
  const std::vector<int> slices = SliceOrder(2, options);
  std::vector<int64_t> order;
  for (int k : slices) {
    order.push_back(2 * k);
    order.push_back(2 * k + 1);
  }
  for (int64_t first : {0, 2}) {
    StepRequest by_ids;
    by_ids.set_step(7);
    by_ids.set_shard_begin(0);
    by_ids.set_shard_end(4);
    by_ids.set_example_ids(EncodeRaw<int64_t>(std::vector<int64_t>(
        order.begin() + first, order.begin() + first + 2)));
    StepRequest by_stream;
    by_stream.set_step(7);
    StreamStep* step = by_stream.mutable_stream();
    step->set_shard(0);
    step->set_pass(0);
    step->set_first(first);
    step->set_count(2);
    StepResponse sa, sb;
    ASSERT_TRUE(a->RunStep(by_ids, &sa).ok());
    absl::Status s = b->RunStep(by_stream, &sb);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(sb.examples(), 2);
    EXPECT_EQ(sa.loss(), sb.loss());
    EXPECT_EQ(sa.replica_checksum(), sb.replica_checksum());
  }
  absl::StatusOr<EvaluateResponse> ea = Evaluate(a.get(), 3);
  absl::StatusOr<EvaluateResponse> eb = Evaluate(b.get(), 3);
  ASSERT_TRUE(ea.ok()) << ea.status();
  ASSERT_TRUE(eb.ok()) << eb.status();
  EXPECT_EQ(eb->examples(), 3);
  EXPECT_EQ(ea->loss_sum(), eb->loss_sum());

  // A step outside the shard is refused, naming it.
  StepRequest outside;
  outside.mutable_stream()->set_first(3);
  outside.mutable_stream()->set_count(2);
  StepResponse response;
  EXPECT_THAT(b->RunStep(outside, &response).message(),
              HasSubstr("outside shard 0's 4 records"));
}

// An epoch of real Fashion-MNIST examples trained from IDX, from gzipped
// TFRecord files and from CSV files, the steps naming the same examples in
// the same order: the accuracies (and losses) after it are identical.
TEST_F(TrainingWorkerTest, FashionMnistFromTfRecordAndCsvMatchesIdx) {
  const MnistFiles real = FashionMnistFiles(kDefaultFashionMnistDir);
  if (!std::filesystem::exists(real.train_images)) {
    TESSERA_SKIP_UNLESS_REQUIRED(kRequireData)
        << real.train_images
        << " is missing; install Debian's dataset-fashion-mnist";
  }
  constexpr int64_t kTrain = 2000, kTest = 1000, kBatch = 100;
  WorkerConfig idx;
  idx.set_worker_index(0);
  idx.set_num_workers(1);
  idx.set_mode("mirrored");
  idx.set_seed(5);
  ModelConfig preset;
  preset.set_kind("mlp");
  preset.set_input_dim(784);
  preset.add_hidden_units(32);
  preset.set_num_classes(10);
  *idx.mutable_model_def() = *PresetModel(preset);
  idx.mutable_optimizer()->set_learning_rate(0.1f);
  idx.mutable_optimizer()->mutable_sgd();
  DataConfig* d = idx.mutable_data();
  d->set_format("idx");
  d->set_train_images(real.train_images);
  d->set_train_labels(real.train_labels);
  d->set_test_images(real.test_images);
  d->set_test_labels(real.test_labels);
  d->set_train_examples(kTrain);
  d->set_test_examples(kTest);
  idx.set_train_begin(0);
  idx.set_train_end(kTrain);

  absl::StatusOr<MnistDataset> train =
      LoadMnist(real.train_images, real.train_labels, 0, kTrain);
  absl::StatusOr<MnistDataset> test =
      LoadMnist(real.test_images, real.test_labels, 0, kTest);
  ASSERT_TRUE(train.ok() && test.ok());
  struct Run {
    std::string format;
    bool gzip;
    int shards;
  };
  std::vector<WorkerConfig> configs = {idx};
  std::vector<std::vector<int64_t>> train_counts;
  for (const Run& run : {Run{"tfrecord", true, 3}, Run{"csv", false, 2}}) {
    WorkerConfig streamed = idx;
    DataConfig* data = streamed.mutable_data();
    data->Clear();
    data->set_format(run.format);
    data->set_label_feature("label");
    data->set_shuffle_buffer(256);
    std::vector<std::string> train_files, test_files;
    for (bool is_train : {true, false}) {
      ConvertOptions options;
      options.output_format = run.format;
      options.prefix =
          absl::StrCat(dir_, "/", run.format, is_train ? "-train" : "-test");
      options.shards = is_train ? run.shards : 1;
      options.gzip = run.gzip;
      absl::StatusOr<std::vector<std::string>> files =
          ConvertMnist(is_train ? *train : *test, options);
      ASSERT_TRUE(files.ok()) << files.status();
      (is_train ? train_files : test_files) = *files;
    }
    std::vector<int64_t> counts;
    for (int k = 0; k < run.shards; ++k) {
      counts.push_back(kTrain * (k + 1) / run.shards - kTrain * k / run.shards);
    }
    *streamed.add_train_shards() = *RecordRange(train_files, counts, 0, kTrain);
    FileSlice* t = streamed.add_test_files();
    t->set_path(test_files[0]);
    t->set_end(kTest);
    configs.push_back(streamed);
    train_counts.push_back(counts);
  }

  // The TFRecord stream's pass 0 as example indices: its slices (the
  // converter's shards, examples in order) in the pass's order, then the
  // shuffle buffer's order of those records.
  absl::StatusOr<StreamOptions> options =
      StreamOptionsOf(configs[1].data(), StreamSeed(idx.seed(), 0), 0);
  ASSERT_TRUE(options.ok());
  const std::vector<int64_t>& tf_counts = train_counts[0];
  std::vector<int64_t> tf_first(tf_counts.size(), 0);
  for (size_t k = 1; k < tf_counts.size(); ++k) {
    tf_first[k] = tf_first[k - 1] + tf_counts[k - 1];
  }
  std::vector<int64_t> tf_by_record;
  for (int k : SliceOrder(static_cast<int>(tf_counts.size()), *options)) {
    for (int64_t i = 0; i < tf_counts[k]; ++i) {
      tf_by_record.push_back(tf_first[k] + i);
    }
  }
  const std::vector<int64_t> order = StreamOrder(kTrain, *options);

  std::vector<EvaluateResponse> results;
  for (size_t c = 0; c < configs.size(); ++c) {
    std::unique_ptr<TrainingWorker> worker = MakeWorker();
    ConfigureResponse configured;
    absl::Status s = worker->Configure(configs[c], &configured);
    ASSERT_TRUE(s.ok()) << s;
    for (int64_t first = 0; first < kTrain; first += kBatch) {
      StepRequest request;
      request.set_step(first / kBatch);
      if (c == 0) {
        // IDX: the examples the TFRecord stream yields at these positions.
        std::vector<int64_t> ids;
        for (int64_t p = first; p < first + kBatch; ++p) {
          ids.push_back(tf_by_record[order[p]]);
        }
        request.set_shard_begin(0);
        request.set_shard_end(kTrain);
        request.set_example_ids(EncodeRaw<int64_t>(ids));
      } else {
        StreamStep* step = request.mutable_stream();
        step->set_first(first);
        step->set_count(kBatch);
      }
      StepResponse response;
      s = worker->RunStep(request, &response);
      ASSERT_TRUE(s.ok()) << s;
    }
    absl::StatusOr<EvaluateResponse> e = Evaluate(worker.get(), kTest);
    ASSERT_TRUE(e.ok()) << e.status();
    results.push_back(*e);
  }
  // The CSV run's slices differ (2 files, not 3), so its order is its own:
  // the same examples, another order; TFRecord's is the IDX run's.
  EXPECT_EQ(results[0].correct(), results[1].correct());
  EXPECT_EQ(results[0].loss_sum(), results[1].loss_sum());
  EXPECT_GT(results[0].correct(), kTest * 6 / 10);
  EXPECT_GT(results[2].correct(), kTest * 6 / 10);
  std::printf(
      "after one epoch of %lld examples: accuracy idx %.4f, tfrecord "
      "gzip %.4f, csv %.4f (its own order)\n",
      static_cast<long long>(kTrain),
      results[0].correct() / static_cast<double>(kTest),
      results[1].correct() / static_cast<double>(kTest),
      results[2].correct() / static_cast<double>(kTest));
}

}  // namespace
}  // namespace tessera
