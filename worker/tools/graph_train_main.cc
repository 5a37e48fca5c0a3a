// Trains a model description (a ModelDef text file) on an MNIST-format
// data set in one process with no network: the layer graph of the workers
// and the parameter servers' optimizer library, applied in place. It is
// the reference a distributed run of the same description is held to.
//
//   build/worker/tools/tessera_graph_train --epochs=1
//       --model_file=deploy/models/cnn_fashion_mnist.textproto

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/bounded_file_read.h"
#include "common/initializer.h"
#include "common/model/model_graph.h"
#include "gflags/gflags.h"
#include "google/protobuf/text_format.h"
#include "ps_server/optimizer.h"
#include "worker/cpu_backend.h"
#include "worker/mnist_dataset.h"
#include "worker/nn/graph.h"

DEFINE_string(model_file, "", "A text-format ModelDef (proto/model.proto).");
DEFINE_string(data_dir, tessera::kDefaultFashionMnistDir,
              "Folder with the four IDX files of an MNIST-format data set.");
DEFINE_int32(epochs, 1, "Epochs to train.");
DEFINE_int32(batch_size, 64, "Examples per step.");
DEFINE_double(learning_rate, 0.001, "Adam's learning rate.");
DEFINE_int64(train_examples, 0, "Use only the first N training examples.");
DEFINE_int64(test_examples, 0, "Use only the first N test examples.");
DEFINE_uint64(seed, 42, "Seed of initial values, shuffling and dropout.");

namespace tessera {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "tessera_graph_train: %s\n",
               std::string(status.message()).c_str());
  return 2;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

int Run() {
  if (FLAGS_epochs < 1 || FLAGS_batch_size < 1 || !(FLAGS_learning_rate > 0) ||
      FLAGS_train_examples < 0 || FLAGS_test_examples < 0) {
    return Fail(absl::InvalidArgumentError(
        "--epochs and --batch_size must be >= 1, --learning_rate > 0 and the "
        "example counts >= 0"));
  }
  absl::StatusOr<std::string> text = ReadBoundedFile(
      FLAGS_model_file, 1 << 20, "model file " + FLAGS_model_file);
  if (!text.ok()) return Fail(text.status());
  ModelDef model;
  if (!google::protobuf::TextFormat::ParseFromString(*text, &model)) {
    return Fail(absl::InvalidArgumentError("model file " + FLAGS_model_file +
                                           " is not a text-format ModelDef"));
  }
  absl::StatusOr<ModelGraph> described = BuildModelGraph(model, FLAGS_seed);
  if (!described.ok()) return Fail(described.status());
  CpuBackend cpu;
  absl::StatusOr<std::unique_ptr<Graph>> graph =
      Graph::Create(*described, &cpu);
  if (!graph.ok()) return Fail(graph.status());

  const MnistFiles files = FashionMnistFiles(FLAGS_data_dir);
  absl::StatusOr<MnistDataset> train =
      LoadMnist(files.train_images, files.train_labels, 0,
                FLAGS_train_examples > 0 ? FLAGS_train_examples : -1);
  if (!train.ok()) return Fail(train.status());
  absl::StatusOr<MnistDataset> test =
      LoadMnist(files.test_images, files.test_labels, 0,
                FLAGS_test_examples > 0 ? FLAGS_test_examples : -1);
  if (!test.ok()) return Fail(test.status());

  // Values, gradients and optimizer slots on the host, as a parameter
  // server holds them.
  OptimizerConfig config;
  config.set_learning_rate(static_cast<float>(FLAGS_learning_rate));
  config.mutable_adam()->set_beta1(0.9f);
  config.mutable_adam()->set_beta2(0.999f);
  config.mutable_adam()->set_epsilon(1e-7f);
  absl::StatusOr<std::unique_ptr<Optimizer>> adam = CreateOptimizer(config);
  if (!adam.ok()) return Fail(adam.status());
  const std::vector<VariableDef>& vars = (*graph)->dense_variables();
  std::vector<std::vector<float>> values, grads;
  std::vector<std::vector<std::vector<float>>> slots;
  for (const VariableDef& v : vars) {
    const int64_t n = NumElements(v.shape);
    values.emplace_back(n);
    FillInitialValues(v.initializer, 0, absl::MakeSpan(values.back()));
    grads.emplace_back(n);
    slots.emplace_back();
    for (int s = 0; s < (*adam)->num_slots(); ++s) {
      slots.back().emplace_back(n, (*adam)->slot_initial_value(s));
    }
  }
  // The optimizer's view of each variable's slots, made once.
  std::vector<std::vector<float*>> slot_ptrs(slots.size());
  for (size_t v = 0; v < slots.size(); ++v) {
    for (auto& slot : slots[v]) slot_ptrs[v].push_back(slot.data());
  }
  std::vector<absl::Span<const float>> value_views(values.begin(),
                                                   values.end());
  std::vector<absl::Span<float>> grad_views(grads.begin(), grads.end());

  const int64_t dim = train->feature_dim();
  std::vector<int64_t> order(train->size);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(FLAGS_seed);
  std::vector<float> x;
  std::vector<int32_t> y;
  int64_t t = 0;
  std::printf("epoch  train_loss  train_acc  test_loss  test_acc    ex/s\n");
  for (int epoch = 1; epoch <= FLAGS_epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    const auto start = std::chrono::steady_clock::now();
    double loss = 0;
    int64_t correct = 0, seen = 0;
    for (int64_t at = 0; at < train->size; at += FLAGS_batch_size) {
      const int64_t n = std::min<int64_t>(FLAGS_batch_size, train->size - at);
      x.resize(n * dim);
      y.resize(n);
      for (int64_t b = 0; b < n; ++b) {
        const int64_t e = order[at + b];
        std::copy_n(train->example(e), dim, x.data() + b * dim);
        y[b] = train->labels[e];
      }
      GraphBatch batch;
      batch.size = n;
      batch.dense = {x};
      batch.class_labels = y;
      if (absl::Status s = (*graph)->SetParameters(value_views); !s.ok()) {
        return Fail(s);
      }
      absl::StatusOr<GraphResult> r =
          (*graph)->TrainStep(batch, FLAGS_seed + t, grad_views);
      if (!r.ok()) return Fail(r.status());
      ++t;
      for (size_t v = 0; v < values.size(); ++v) {
        (*adam)->Apply(values[v].data(), grads[v].data(), slot_ptrs[v].data(),
                       static_cast<int64_t>(values[v].size()), t);
      }
      loss += r->loss_sum;
      correct += r->correct;
      seen += n;
      const double secs = Seconds(start);
      std::fprintf(stderr,
                   "\repoch %d %6.1f%%  %8.0f ex/s  loss %.4f  ETA %4.0fs",
                   epoch, 100.0 * seen / train->size, seen / secs, loss / seen,
                   (train->size - seen) / std::max(seen / secs, 1.0));
    }
    std::fprintf(stderr, "\n");
    const double secs = Seconds(start);
    double test_loss = 0;
    int64_t test_correct = 0;
    constexpr int64_t kSlice = 1000;
    for (int64_t at = 0; at < test->size; at += kSlice) {
      const int64_t n = std::min(kSlice, test->size - at);
      GraphBatch batch;
      batch.size = n;
      batch.dense = {absl::MakeConstSpan(test->example(at), n * dim)};
      batch.class_labels = absl::MakeConstSpan(test->labels.data() + at, n);
      absl::StatusOr<GraphResult> r = (*graph)->Evaluate(batch);
      if (!r.ok()) return Fail(r.status());
      test_loss += r->loss_sum;
      test_correct += r->correct;
    }
    std::printf("%-5d  %10.4f  %9.4f  %9.4f  %8.4f  %6.0f\n", epoch,
                loss / seen, static_cast<double>(correct) / seen,
                test_loss / test->size,
                static_cast<double>(test_correct) / test->size, seen / secs);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Trains a model description on an MNIST-format data set in one process");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return tessera::Run();
}
