// tessera_ctr_local_train: trains the click-through model in one process
// (worker/ctr_local_trainer.h) on a data set written by tessera_ctr_gen and
// prints, after each epoch, the test AUC and log loss next to the best
// achievable ones from meta.json.
//
//   tessera_ctr_local_train --data_dir=/data/ctr --epochs=2

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gflags/gflags.h"
#include "nlohmann/json.hpp"
#include "worker/cpu_backend.h"
#include "worker/criteo_reader.h"
#include "worker/ctr_local_trainer.h"
#include "worker/ctr_metrics.h"

DEFINE_string(data_dir, "", "Folder written by tessera_ctr_gen.");
DEFINE_int32(epochs, 2, "Epochs to train.");
DEFINE_int32(embedding_dim, 8, "Embedding dimension.");
DEFINE_string(hidden_units, "64,32", "Hidden layer widths, comma-separated.");
DEFINE_string(combiner, "", "sum or mean; empty: the generator's.");
DEFINE_int32(batch_size, 256, "Examples per step.");
DEFINE_double(embedding_learning_rate, 0.05, "Adagrad, embedding rows.");
DEFINE_double(learning_rate, 0.001, "Adam, dense layers.");
DEFINE_double(dropout, 0, "Dropout rate after each hidden layer.");
DEFINE_int64(train_examples, 0, "Use only the first N examples (0: all).");
DEFINE_uint64(seed, 42, "Seed of initial values, shuffling and dropout.");

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "tessera_ctr_local_train: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const std::string dir = FLAGS_data_dir + "/";
  std::ifstream meta_file(dir + "meta.json");
  if (!meta_file) {
    std::fprintf(stderr, "cannot open %smeta.json\n", dir.c_str());
    return 1;
  }
  const nlohmann::json meta = nlohmann::json::parse(
      std::string(std::istreambuf_iterator<char>(meta_file), {}), nullptr,
      /*allow_exceptions=*/false);
  if (meta.is_discarded()) {
    std::fprintf(stderr, "%smeta.json is not JSON\n", dir.c_str());
    return 1;
  }
  tessera::CriteoFormat format{meta.value("dense", 13),
                               meta.value("fields", 26)};

  tessera::ModelConfig config;
  config.set_kind("ctr");
  config.set_embedding_dim(FLAGS_embedding_dim);
  config.set_num_fields(format.num_fields);
  config.set_num_dense(format.num_dense);
  config.set_combiner(FLAGS_combiner.empty()
                          ? meta.value("combiner", std::string("sum"))
                          : FLAGS_combiner);
  config.set_dropout(static_cast<float>(FLAGS_dropout));
  for (absl::string_view part :
       absl::StrSplit(FLAGS_hidden_units, ',', absl::SkipEmpty())) {
    int units = 0;
    if (!absl::SimpleAtoi(part, &units)) {
      std::fprintf(stderr, "--hidden_units: bad width\n");
      return 2;
    }
    config.add_hidden_units(units);
  }

  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<tessera::CtrDataset> train = tessera::LoadCriteo(
      dir + meta.value("train_file", std::string("train.tsv")), 0,
      FLAGS_train_examples > 0 ? FLAGS_train_examples : -1, format);
  if (!train.ok()) return Fail(train.status());
  absl::StatusOr<tessera::CtrDataset> test = tessera::LoadCriteo(
      dir + meta.value("test_file", std::string("test.tsv")), 0, -1, format);
  if (!test.ok()) return Fail(test.status());
  std::printf("loaded %lld training and %lld test examples in %.1f s\n",
              static_cast<long long>(train->size),
              static_cast<long long>(test->size), Seconds(start));

  tessera::CpuBackend backend;
  tessera::LocalCtrTrainerOptions options;
  options.batch_size = FLAGS_batch_size;
  options.embedding_learning_rate =
      static_cast<float>(FLAGS_embedding_learning_rate);
  options.dense_learning_rate = static_cast<float>(FLAGS_learning_rate);
  options.seed = FLAGS_seed;
  absl::StatusOr<std::unique_ptr<tessera::LocalCtrTrainer>> trainer =
      tessera::LocalCtrTrainer::Create(config, options, &backend);
  if (!trainer.ok()) return Fail(trainer.status());
  const double best_auc = meta.value("best_auc", 0.0);
  const double best_log_loss = meta.value("best_log_loss", 0.0);
  for (int epoch = 0; epoch < FLAGS_epochs; ++epoch) {
    start = std::chrono::steady_clock::now();
    absl::StatusOr<double> loss = (*trainer)->TrainEpoch(*train, epoch);
    if (!loss.ok()) return Fail(loss.status());
    const double train_seconds = Seconds(start);
    absl::StatusOr<std::vector<float>> p = (*trainer)->Predict(*test);
    if (!p.ok()) return Fail(p.status());
    absl::StatusOr<double> auc = tessera::RocAuc(*p, test->labels);
    if (!auc.ok()) return Fail(auc.status());
    absl::StatusOr<double> log_loss = tessera::LogLoss(*p, test->labels);
    if (!log_loss.ok()) return Fail(log_loss.status());
    std::printf(
        "epoch %d: train loss %.4f (%.1f s) | test AUC %.4f (best %.4f, gap "
        "%.4f) | log loss %.4f (best %.4f)\n",
        epoch + 1, *loss, train_seconds, *auc, best_auc, best_auc - *auc,
        *log_loss, best_log_loss);
    std::fflush(stdout);
  }
  return 0;
}
