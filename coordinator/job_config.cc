#include "coordinator/job_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/model_spec.h"
#include "common/training_mode.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "ps_server/optimizer.h"

DEFINE_string(job_file, "",
              "A text-format JobConfig describing the whole job; flags given "
              "on the command line override its fields.");
DEFINE_int32(epochs, 10, "Epochs to train.");
DEFINE_int64(steps_per_epoch, 0,
             "Steps per epoch; 0 means one pass over the training data.");
DEFINE_int32(batch_size, 64, "Examples per step (per worker).");
DEFINE_double(learning_rate, 0.001, "Learning rate of the optimizer.");
DEFINE_string(optimizer, "adam",
              "Server-side optimizer: sgd, momentum, adam, adagrad, ftrl.");
DEFINE_double(momentum, 0.9, "Momentum (optimizer momentum).");
DEFINE_string(partitioner, "fixed",
              "How variables are split over parameter servers: none, fixed, "
              "min_size, max_size.");
DEFINE_int64(num_shards, 2, "Shards per variable (partitioner fixed).");
DEFINE_int64(min_shard_bytes, 256 << 10,
             "Smallest shard (partitioner min_size).");
DEFINE_int64(max_shard_bytes, 1 << 20, "Largest shard (partitioner max_size).");
DEFINE_int64(max_shards, 0,
             "Cap on shards per variable (min_size: 0 means 1, as in TF; "
             "max_size: 0 means no cap).");
DEFINE_string(model, "mlp", "Model: mlp.");
DEFINE_string(hidden_units, "128", "Hidden layer widths, comma-separated.");
DEFINE_double(dropout, 0.2, "Dropout rate after each hidden layer.");
DEFINE_string(data_dir, "/usr/share/datasets/fashion-mnist",
              "Folder with the four IDX files (gzipped or not) of an "
              "MNIST-format data set.");
DEFINE_int64(train_examples, 0,
             "Use only the first N training examples (0: all).");
DEFINE_int64(test_examples, 0, "Use only the first N test examples (0: all).");
DEFINE_string(mode, "async",
              "Training mode: async, sync, ssp:S (a worker may run at most S "
              "steps ahead of the slowest) or mirrored (no parameter "
              "servers; gradients all-reduced between workers).");
DEFINE_int32(backup_workers, 0,
             "Sync mode: apply a step once all but this many workers have "
             "pushed; later gradients are dropped and counted.");
DEFINE_uint64(seed, 42, "Seed of initial values, shuffling and dropout.");

namespace tessera {
namespace {

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) {
      first_ = absl::StrCat("line ", line + 1, " column ", column + 1, ": ",
                            message);
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

bool Explicit(const char* flag) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(flag, &info) && !info.is_default;
}

absl::Status ApplyFlags(bool only_explicit, JobConfig* job) {
  auto use = [&](const char* flag) { return !only_explicit || Explicit(flag); };
  ModelConfig* model = job->mutable_model();
  if (use("model")) model->set_kind(FLAGS_model);
  if (model->input_dim() == 0) model->set_input_dim(784);
  if (model->num_classes() == 0) model->set_num_classes(10);
  if (use("hidden_units")) {
    model->clear_hidden_units();
    for (absl::string_view part :
         absl::StrSplit(FLAGS_hidden_units, ',', absl::SkipWhitespace())) {
      int units = 0;
      if (!absl::SimpleAtoi(part, &units)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--hidden_units: \"", part, "\" is not a whole number"));
      }
      model->add_hidden_units(units);
    }
  }
  if (use("dropout")) model->set_dropout(FLAGS_dropout);

  DataConfig* data = job->mutable_data();
  if (use("data_dir") || data->train_images().empty()) {
    const std::string dir = FLAGS_data_dir;
    data->set_format("idx");
    data->set_train_images(dir + "/train-images-idx3-ubyte.gz");
    data->set_train_labels(dir + "/train-labels-idx1-ubyte.gz");
    data->set_test_images(dir + "/t10k-images-idx3-ubyte.gz");
    data->set_test_labels(dir + "/t10k-labels-idx1-ubyte.gz");
  }
  if (use("train_examples")) data->set_train_examples(FLAGS_train_examples);
  if (use("test_examples")) data->set_test_examples(FLAGS_test_examples);

  OptimizerConfig* opt = job->mutable_optimizer();
  if (use("learning_rate")) opt->set_learning_rate(FLAGS_learning_rate);
  if (use("optimizer") || opt->kind_case() == OptimizerConfig::KIND_NOT_SET) {
    if (FLAGS_optimizer == "sgd") {
      opt->mutable_sgd();
    } else if (FLAGS_optimizer == "momentum") {
      opt->mutable_momentum()->set_momentum(FLAGS_momentum);
    } else if (FLAGS_optimizer == "adam") {
      AdamOptions* adam = opt->mutable_adam();
      // Keras' defaults.
      adam->set_beta1(0.9f);
      adam->set_beta2(0.999f);
      adam->set_epsilon(1e-7f);
    } else if (FLAGS_optimizer == "adagrad") {
      opt->mutable_adagrad();  // Keras' defaults when unset
    } else if (FLAGS_optimizer == "ftrl") {
      opt->mutable_ftrl();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--optimizer: unknown optimizer \"", FLAGS_optimizer,
          "\" (sgd, momentum, adam, adagrad, ftrl)"));
    }
  }
  if (use("momentum") && opt->has_momentum()) {
    opt->mutable_momentum()->set_momentum(FLAGS_momentum);
  }

  PartitionerConfig* part = job->mutable_partitioner();
  if (use("partitioner")) part->set_kind(FLAGS_partitioner);
  if (use("num_shards")) part->set_num_shards(FLAGS_num_shards);
  if (use("min_shard_bytes")) part->set_min_shard_bytes(FLAGS_min_shard_bytes);
  if (use("max_shard_bytes")) part->set_max_shard_bytes(FLAGS_max_shard_bytes);
  if (use("max_shards")) part->set_max_shards(FLAGS_max_shards);

  if (use("mode")) job->set_mode(FLAGS_mode);
  if (use("backup_workers")) job->set_backup_workers(FLAGS_backup_workers);
  ScheduleConfig* schedule = job->mutable_schedule();
  if (use("epochs")) schedule->set_epochs(FLAGS_epochs);
  if (use("steps_per_epoch"))
    schedule->set_steps_per_epoch(FLAGS_steps_per_epoch);
  if (use("batch_size")) schedule->set_batch_size(FLAGS_batch_size);
  if (use("seed")) schedule->set_seed(FLAGS_seed);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobConfig> ReadJobFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("job file ", path, ": cannot open"));
  }
  std::stringstream text;
  text << in.rdbuf();
  JobConfig job;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text.str(), &job)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job file ", path, ": ", errors.first()));
  }
  return job;
}

absl::StatusOr<JobConfig> JobConfigFromFlags() {
  // Start from every flag's value (defaults included), lay the file over
  // it (fields the file leaves unset keep the flag default), then the
  // flags given explicitly on the command line.
  JobConfig job;
  if (absl::Status s = ApplyFlags(/*only_explicit=*/false, &job); !s.ok()) {
    return s;
  }
  if (FLAGS_job_file.empty()) return job;
  absl::StatusOr<JobConfig> file = ReadJobFile(FLAGS_job_file);
  if (!file.ok()) return file.status();
  // Repeated fields append when merged; the file's list replaces ours.
  if (file->model().hidden_units_size() > 0) {
    job.mutable_model()->clear_hidden_units();
  }
  job.MergeFrom(*file);
  if (absl::Status s = ApplyFlags(/*only_explicit=*/true, &job); !s.ok()) {
    return s;
  }
  return job;
}

absl::Status ValidateJobConfig(const JobConfig& job) {
  if (absl::Status s = ValidateModelConfig(job.model()); !s.ok()) return s;
  if (absl::StatusOr<std::unique_ptr<Optimizer>> opt =
          CreateOptimizer(job.optimizer());
      !opt.ok()) {
    return opt.status();
  }
  if (job.model().kind() == "ctr") {
    // The click-through model trains in one process for now
    // (tessera_ctr_local_train); the distributed job needs the workers'
    // sparse pulls and per-variable optimizers.
    return absl::UnimplementedError(
        "model ctr: distributed training of the click-through model is not "
        "available yet; use tessera_ctr_local_train");
  }
  absl::StatusOr<TrainingMode> mode = ParseTrainingMode(job.mode());
  if (!mode.ok()) return mode.status();
  if (job.backup_workers() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backup_workers must be >= 0, got ", job.backup_workers()));
  }
  if (job.backup_workers() > 0 && mode->kind != TrainingMode::Kind::kSync) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backup_workers is for mode sync; mode is ", mode->ToString()));
  }
  const ScheduleConfig& s = job.schedule();
  if (s.epochs() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("epochs must be >= 1, got ", s.epochs()));
  }
  if (s.batch_size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size must be >= 1, got ", s.batch_size()));
  }
  if (s.steps_per_epoch() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "steps_per_epoch must be >= 0, got ", s.steps_per_epoch()));
  }
  if (job.data().train_examples() < 0 || job.data().test_examples() < 0) {
    return absl::InvalidArgumentError(
        "train_examples and test_examples must be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace tessera
