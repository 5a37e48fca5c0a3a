#include "coordinator/job_flags.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/data_format.h"
#include "common/job_file.h"
#include "common/model/model_graph.h"
#include "common/model/model_presets.h"
#include "common/model/model_support.h"
#include "common/model/variable_optimizer.h"
#include "common/model_spec.h"
#include "common/optimizer/keras_defaults.h"
#include "common/optimizer/learning_rate_schedule.h"
#include "common/optimizer/optimizer.h"
#include "common/optimizer/row_precision.h"
#include "common/training_mode.h"

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
DEFINE_string(model, "mlp",
              "Preset model: mlp, ctr (click-through); a job file's model_def "
              "describes any other.");
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
              "steps ahead of the slowest), mirrored (no parameter "
              "servers; gradients all-reduced between workers), hybrid "
              "(dense variables all-reduced between workers, tables "
              "sharded on the parameter servers, rows pushed "
              "asynchronously), hybrid:ssp:S (a worker's row pushes left in "
              "flight for up to S more steps) or hybrid:sync (the rows "
              "aggregated per "
              "global step as in sync).");
DEFINE_string(table_placements, "",
              "Hybrid and mirrored modes: where tables live, as "
              "NAME:replicated or NAME:sharded, comma-separated (the job "
              "file's table_placements); a table not named is placed by "
              "size (--replicate_tables_below).");
DEFINE_int64(replicate_tables_below, 0,
             "Hybrid mode: replicate a fixed-vocabulary table of at most "
             "this many bytes on every worker; 0: 65536, negative: never.");
DEFINE_int32(backup_workers, 0,
             "Sync mode: apply a step once all but this many workers have "
             "pushed; later gradients are dropped and counted.");
DEFINE_uint64(seed, 42, "Seed of initial values, shuffling and dropout.");
DEFINE_string(data_format, "",
              "idx (MNIST-format files) or criteo (train.tsv[.gz] and "
              "test.tsv[.gz] in --data_dir); empty: criteo for --model=ctr, "
              "else idx.");
DEFINE_int32(embedding_dim, 8, "Model ctr: floats per embedding row.");
DEFINE_int32(num_fields, 26, "Model ctr: categorical fields (tables).");
DEFINE_int32(num_dense, 13, "Model ctr: dense (integer) features.");
DEFINE_int64(vocab_size, 0,
             "Model ctr: rows per embedding table (a feature id maps to id "
             "mod vocab_size); 0: growing hash tables.");
DEFINE_string(combiner, "sum",
              "Model ctr: how a bag's rows combine: sum, mean.");
DEFINE_string(embedding_optimizer, "",
              "Optimizer of the embedding tables (sgd, momentum, adam, "
              "adagrad, ftrl, rowwise_adagrad); empty: --optimizer.");
DEFINE_string(table_precision, "fp32",
              "How the parameter servers store every embedding table's rows "
              "(fp32, fp16, bf16; the job file's table_precisions set it "
              "per table): the optimizer computes in fp32 and fp16/bf16 "
              "rows are rounded stochastically.");
DEFINE_string(row_gradient_precision, "",
              "What row gradients travel in from the workers to the "
              "servers (fp32, fp16, bf16; rounded to nearest); empty: each "
              "table's own precision (--table_precision). fp16 with fp32 "
              "tables halves the push bytes, as Monolith and Persia do; the "
              "job file's row_gradient_precisions set it per table.");
DEFINE_double(embedding_learning_rate, 0,
              "Learning rate of --embedding_optimizer; 0: --learning_rate.");
DEFINE_string(lr_schedule, "",
              "The learning rate's schedule of --optimizer (and of the "
              "tables while they have no optimizer of their own): a decay "
              "(constant, piecewise, exponential, cosine, polynomial) and "
              "comma-separated key=value pairs named as LearningRateSchedule's "
              "fields, e.g. cosine,warmup_steps=500,decay_steps=20000,"
              "alpha=0.01 (docs/optimizers.md); empty: the job file's.");
DEFINE_string(embedding_lr_schedule, "",
              "The same for the embedding tables' optimizers "
              "(embedding_optimizer, made from --optimizer's if the job has "
              "none, and every table_optimizers entry); empty: the job "
              "file's.");
DEFINE_double(weight_decay, 0,
              "Decoupled weight decay of --optimizer, w -= lr * wd * w before "
              "each update (Keras 3's weight_decay; AdamW with adam); 0: the "
              "job file's.");
DEFINE_double(embedding_weight_decay, 0,
              "The same for the embedding tables' optimizers; 0: the job "
              "file's.");
DEFINE_string(lr_scaling, "",
              "none or linear: the linear scaling rule, the rates of the "
              "optimizers that average a global batch multiplied by the "
              "global batch over --lr_reference_batch (sync, hybrid:sync, "
              "mirrored; hybrid: the dense optimizer); refused in async and "
              "ssp. Empty: the job file's.");
DEFINE_int64(lr_reference_batch, 0,
             "The batch the learning rates were tuned for (--lr_scaling); 0: "
             "the job file's, or one worker's batch.");
DEFINE_string(table_updates, "",
              "Which rows of every embedding table an update moves: lazy "
              "(only those the batch touched, as TF's LazyAdam) or dense "
              "(every row, as Keras' optimizers); empty: each optimizer's "
              "table_updates in the job file (unset: lazy).");
DEFINE_double(clip_value, 0,
              "Clip every gradient element into [-v, v] (Keras' clipvalue), "
              "for every optimizer of the job; 0: the job file's. At most one "
              "of --clip_value, --clip_norm, --global_clip_norm.");
DEFINE_double(clip_norm, 0,
              "Clip each variable's gradient to this L2 norm (Keras' "
              "clipnorm), for every optimizer of the job; 0: the job file's.");
DEFINE_double(global_clip_norm, 0,
              "Clip the gradients of all the variables an optimizer trains "
              "together to this L2 norm (Keras' global_clipnorm); 0: the job "
              "file's. Each worker's own gradient in async, ssp and sync, the "
              "all-reduced one in mirrored (docs/design.md).");
DEFINE_int64(expected_rows_per_shard, 0,
             "Growing tables: rows each parameter server's shard of a table "
             "expects (capacity hint; 0: default).");

namespace tessera {
namespace {

bool Explicit(const char* flag) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(flag, &info) && !info.is_default;
}

absl::StatusOr<LearningRateSchedule> ScheduleFlag(const char* flag,
                                                  const std::string& text) {
  absl::StatusOr<LearningRateSchedule> schedule =
      ParseLearningRateSchedule(text);
  if (!schedule.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", schedule.status().message()));
  }
  if (absl::Status s = ValidateLearningRateSchedule(*schedule, flag); !s.ok()) {
    return s;
  }
  return schedule;
}

absl::Status CheckWeightDecayFlag(const char* flag, double value) {
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " must be a finite number >= 0 (0: the job file's), got ",
        value));
  }
  return absl::OkStatus();
}

// Whether a flag's value goes into the job: every flag's on the first pass
// (the defaults a job file then overlays), only those given on the command
// line on the second (over the file).
struct FlagUse {
  bool only_explicit;
  bool operator()(const char* flag) const {
    return !only_explicit || Explicit(flag);
  }
};

// --lr_schedule, --embedding_lr_schedule, --weight_decay,
// --embedding_weight_decay, --lr_scaling and --lr_reference_batch.
absl::Status ApplyLearningRateFlags(const FlagUse& use, JobConfig* job) {
  OptimizerConfig* opt = job->mutable_optimizer();
  if (use("lr_schedule") && !FLAGS_lr_schedule.empty()) {
    absl::StatusOr<LearningRateSchedule> s =
        ScheduleFlag("--lr_schedule", FLAGS_lr_schedule);
    if (!s.ok()) return s.status();
    *opt->mutable_schedule() = *std::move(s);
  }
  if (use("weight_decay") && FLAGS_weight_decay != 0) {
    if (absl::Status s =
            CheckWeightDecayFlag("--weight_decay", FLAGS_weight_decay);
        !s.ok()) {
      return s;
    }
    opt->set_weight_decay(static_cast<float>(FLAGS_weight_decay));
  }
  std::optional<LearningRateSchedule> table_schedule;
  if (use("embedding_lr_schedule") && !FLAGS_embedding_lr_schedule.empty()) {
    absl::StatusOr<LearningRateSchedule> s =
        ScheduleFlag("--embedding_lr_schedule", FLAGS_embedding_lr_schedule);
    if (!s.ok()) return s.status();
    table_schedule = *std::move(s);
  }
  const bool table_decay =
      use("embedding_weight_decay") && FLAGS_embedding_weight_decay != 0;
  if (table_decay) {
    if (absl::Status s = CheckWeightDecayFlag("--embedding_weight_decay",
                                              FLAGS_embedding_weight_decay);
        !s.ok()) {
      return s;
    }
  }
  if (table_schedule.has_value() || table_decay) {
    // The tables need an optimizer of their own to differ from the dense.
    if (!job->has_embedding_optimizer()) {
      *job->mutable_embedding_optimizer() = *opt;
    }
    std::vector<OptimizerConfig*> tables = {job->mutable_embedding_optimizer()};
    for (auto& [table, optimizer] : *job->mutable_table_optimizers()) {
      tables.push_back(&optimizer);
    }
    for (OptimizerConfig* t : tables) {
      if (table_schedule.has_value()) *t->mutable_schedule() = *table_schedule;
      if (table_decay) {
        t->set_weight_decay(static_cast<float>(FLAGS_embedding_weight_decay));
      }
    }
  }
  if (use("lr_scaling") && !FLAGS_lr_scaling.empty()) {
    if (FLAGS_lr_scaling != "none" && FLAGS_lr_scaling != "linear") {
      return absl::InvalidArgumentError(
          absl::StrCat("--lr_scaling: \"", FLAGS_lr_scaling,
                       "\" is neither none nor linear"));
    }
    job->set_lr_scaling(FLAGS_lr_scaling);
  }
  if (use("lr_reference_batch") && FLAGS_lr_reference_batch != 0) {
    if (FLAGS_lr_reference_batch < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--lr_reference_batch must be >= 0 (0: one worker's batch), got ",
          FLAGS_lr_reference_batch));
    }
    job->set_lr_reference_batch(FLAGS_lr_reference_batch);
  }
  return absl::OkStatus();
}

// `flag`'s optimizer `kind` with Keras' defaults, learning rate kept.
absl::Status SetOptimizerKind(const char* flag, const std::string& kind,
                              OptimizerConfig* opt) {
  if (kind == "sgd") {
    opt->mutable_sgd();
  } else if (kind == "momentum") {
    opt->mutable_momentum()->set_momentum(FLAGS_momentum);
  } else if (kind == "adam") {
    *opt->mutable_adam() = KerasAdamOptions();
  } else if (kind == "adagrad") {
    opt->mutable_adagrad();  // Keras' defaults when unset
  } else if (kind == "ftrl") {
    opt->mutable_ftrl();
  } else if (kind == "rowwise_adagrad") {
    opt->mutable_rowwise_adagrad();  // FBGEMM's defaults when unset
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": unknown optimizer \"", kind,
        "\" (sgd, momentum, adam, adagrad, ftrl, rowwise_adagrad)"));
  }
  return absl::OkStatus();
}

// --model and the preset's shape: --hidden_units, --dropout, and the
// click-through model's --embedding_dim, --num_fields, --num_dense,
// --vocab_size and --combiner.
absl::Status ApplyModelFlags(const FlagUse& use, JobConfig* job) {
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
  const bool ctr = model->kind() == "ctr";
  if (use("dropout")) {
    // The click-through model trains without dropout unless asked.
    model->set_dropout(ctr && !Explicit("dropout") ? 0.0f : FLAGS_dropout);
  }
  if (ctr) {
    if (use("embedding_dim")) model->set_embedding_dim(FLAGS_embedding_dim);
    if (use("num_fields")) model->set_num_fields(FLAGS_num_fields);
    if (use("num_dense")) model->set_num_dense(FLAGS_num_dense);
    if (use("vocab_size")) model->set_vocab_size(FLAGS_vocab_size);
    if (use("combiner")) model->set_combiner(FLAGS_combiner);
  }
  return absl::OkStatus();
}

// --data_format, --data_dir, --train_examples and --test_examples.
absl::Status ApplyDataFlags(const FlagUse& use, JobConfig* job) {
  DataConfig* data = job->mutable_data();
  const bool ctr = job->model().kind() == "ctr";
  std::string format = FLAGS_data_format;
  if (format.empty()) {
    format = !data->format().empty() && !use("model")
                 ? data->format()
                 : DataFormatName(ctr ? DataFormat::kCriteo : DataFormat::kIdx);
  }
  // Streamed formats name their files in the job file (train_files and
  // test_files globs), not through --data_dir.
  const bool streamed = IsStreamedFormat(format);
  if (!DataFormatNamed(format).has_value()) {
    // Name where the format came from: the flag, or the job file's field.
    const std::string where =
        FLAGS_data_format.empty()
            ? absl::StrCat("job file ", FLAGS_job_file, ": data { format }")
            : "--data_format";
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unknown data format \"", format,
                     "\"; the known formats are idx, criteo, tfrecord and "
                     "csv"));
  }
  if (streamed) {
    if (Explicit("data_dir")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data_dir does not apply to data format ", format,
          ": the job file's data { train_files test_files } name the files"));
    }
    data->set_format(format);
  } else {
    const bool have_paths = DataFormatNamed(format) == DataFormat::kCriteo
                                ? !data->train_path().empty()
                                : !data->train_images().empty();
    if (use("data_dir") || use("data_format") || !have_paths) {
      data->set_format(format);
      SetDataDir(FLAGS_data_dir, data);
    }
  }
  if (use("train_examples")) data->set_train_examples(FLAGS_train_examples);
  if (use("test_examples")) data->set_test_examples(FLAGS_test_examples);
  return absl::OkStatus();
}

// --learning_rate, --optimizer, --momentum, --embedding_optimizer and
// --embedding_learning_rate.
absl::Status ApplyOptimizerFlags(const FlagUse& use, JobConfig* job) {
  OptimizerConfig* opt = job->mutable_optimizer();
  if (use("learning_rate")) opt->set_learning_rate(FLAGS_learning_rate);
  if (use("optimizer") || opt->kind_case() == OptimizerConfig::KIND_NOT_SET) {
    if (absl::Status s = SetOptimizerKind("--optimizer", FLAGS_optimizer, opt);
        !s.ok()) {
      return s;
    }
  }
  if (use("momentum") && opt->has_momentum()) {
    opt->mutable_momentum()->set_momentum(FLAGS_momentum);
  }
  if (use("embedding_learning_rate") &&
      !(std::isfinite(FLAGS_embedding_learning_rate) &&
        FLAGS_embedding_learning_rate >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--embedding_learning_rate must be a finite number >= 0 (0: "
        "--learning_rate), got ",
        FLAGS_embedding_learning_rate));
  }
  if ((use("embedding_optimizer") || use("embedding_learning_rate")) &&
      (!FLAGS_embedding_optimizer.empty() ||
       FLAGS_embedding_learning_rate > 0)) {
    // A rate alone keeps the tables' optimizer: the job file's
    // embedding_optimizer, or else the dense optimizer the tables trained
    // with until now (it took --optimizer's default kind, so a job file's
    // Adagrad tables became Adam).
    const bool had_tables_optimizer = job->has_embedding_optimizer();
    OptimizerConfig* emb = job->mutable_embedding_optimizer();
    if (!FLAGS_embedding_optimizer.empty()) {
      if (absl::Status s = SetOptimizerKind("--embedding_optimizer",
                                            FLAGS_embedding_optimizer, emb);
          !s.ok()) {
        return s;
      }
    } else if (!had_tables_optimizer) {
      *emb = *opt;
    }
    if (FLAGS_embedding_learning_rate > 0) {
      emb->set_learning_rate(FLAGS_embedding_learning_rate);
    } else if (!had_tables_optimizer) {
      emb->set_learning_rate(opt->learning_rate());
    }
  }
  return absl::OkStatus();
}

// --table_updates, for every optimizer a table can train with.
absl::Status ApplyTableUpdatesFlag(const FlagUse& use, JobConfig* job) {
  OptimizerConfig* opt = job->mutable_optimizer();
  if (use("table_updates") && !FLAGS_table_updates.empty()) {
    TableUpdates updates;
    if (FLAGS_table_updates == "lazy") {
      updates = TABLE_UPDATES_LAZY;
    } else if (FLAGS_table_updates == "dense") {
      updates = TABLE_UPDATES_DENSE;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--table_updates: \"", FLAGS_table_updates,
                       "\" is neither lazy nor dense"));
    }
    // Every optimizer a table can train with (VariableOptimizer).
    opt->set_table_updates(updates);
    if (job->has_embedding_optimizer()) {
      job->mutable_embedding_optimizer()->set_table_updates(updates);
    }
    for (auto& [table, optimizer] : *job->mutable_table_optimizers()) {
      optimizer.set_table_updates(updates);
    }
  }
  return absl::OkStatus();
}

// --clip_value, --clip_norm and --global_clip_norm.
absl::Status ApplyClippingFlags(const FlagUse& use, JobConfig* job) {
  OptimizerConfig* opt = job->mutable_optimizer();
  if ((use("clip_value") && FLAGS_clip_value != 0) ||
      (use("clip_norm") && FLAGS_clip_norm != 0) ||
      (use("global_clip_norm") && FLAGS_global_clip_norm != 0)) {
    int set = 0;
    for (const auto& [flag, v] :
         {std::pair<const char*, double>{"--clip_value", FLAGS_clip_value},
          {"--clip_norm", FLAGS_clip_norm},
          {"--global_clip_norm", FLAGS_global_clip_norm}}) {
      if (!std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " must be a finite number >= 0 (0: off), got ", v));
      }
      set += v > 0;
    }
    if (set > 1) {
      return absl::InvalidArgumentError(
          "set at most one of --clip_value, --clip_norm and "
          "--global_clip_norm (as Keras' clipvalue, clipnorm and "
          "global_clipnorm)");
    }
    GradientClipping clipping;
    clipping.set_value(static_cast<float>(FLAGS_clip_value));
    clipping.set_norm(static_cast<float>(FLAGS_clip_norm));
    clipping.set_global_norm(static_cast<float>(FLAGS_global_clip_norm));
    // The flags replace every optimizer's clipping (VariableOptimizer).
    *opt->mutable_clipping() = clipping;
    if (job->has_embedding_optimizer()) {
      *job->mutable_embedding_optimizer()->mutable_clipping() = clipping;
    }
    for (auto& [table, optimizer] : *job->mutable_table_optimizers()) {
      *optimizer.mutable_clipping() = clipping;
    }
  }
  return absl::OkStatus();
}

// --partitioner, --num_shards, --min_shard_bytes, --max_shard_bytes and
// --max_shards.
void ApplyPartitionerFlags(const FlagUse& use, JobConfig* job) {
  PartitionerConfig* part = job->mutable_partitioner();
  if (use("partitioner")) part->set_kind(FLAGS_partitioner);
  if (use("num_shards")) part->set_num_shards(FLAGS_num_shards);
  if (use("min_shard_bytes")) part->set_min_shard_bytes(FLAGS_min_shard_bytes);
  if (use("max_shard_bytes")) part->set_max_shard_bytes(FLAGS_max_shard_bytes);
  if (use("max_shards")) part->set_max_shards(FLAGS_max_shards);
}

// --mode, --backup_workers and --replicate_tables_below.
void ApplyModeFlags(const FlagUse& use, JobConfig* job) {
  if (use("mode")) job->set_mode(FLAGS_mode);
  if (use("backup_workers")) job->set_backup_workers(FLAGS_backup_workers);
  if (use("replicate_tables_below")) {
    job->set_replicate_tables_below(FLAGS_replicate_tables_below);
  }
}

// Where and how tables are kept: --expected_rows_per_shard,
// --table_precision, --row_gradient_precision and --table_placements.
absl::Status ApplyTableFlags(const FlagUse& use, JobConfig* job) {
  if (use("expected_rows_per_shard")) {
    job->set_expected_rows_per_shard(FLAGS_expected_rows_per_shard);
  }
  if (use("table_precision")) {
    if (FLAGS_table_precision == "fp32") {
      job->set_table_precision(ROW_FP32);
    } else if (FLAGS_table_precision == "fp16") {
      job->set_table_precision(ROW_FP16);
    } else if (FLAGS_table_precision == "bf16") {
      job->set_table_precision(ROW_BF16);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--table_precision: \"", FLAGS_table_precision,
                       "\" is not fp32, fp16 or bf16"));
    }
  }
  if (use("row_gradient_precision") && !FLAGS_row_gradient_precision.empty()) {
    absl::StatusOr<RowPrecision> precision =
        ParseRowPrecision(FLAGS_row_gradient_precision);
    if (!precision.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--row_gradient_precision: \"", FLAGS_row_gradient_precision,
          "\" is not fp32, fp16 or bf16 (or empty: each table's "
          "own precision)"));
    }
    job->set_row_gradient_precision(*precision);
  }
  if (use("table_placements") && !FLAGS_table_placements.empty()) {
    // The flag replaces the job file's placements of the tables it names;
    // a table it names twice has no placement the user can have meant.
    absl::flat_hash_map<std::string, absl::string_view> named;
    for (absl::string_view entry :
         absl::StrSplit(FLAGS_table_placements, ',', absl::SkipEmpty())) {
      const size_t colon = entry.rfind(':');
      const absl::string_view where =
          colon == absl::string_view::npos ? "" : entry.substr(colon + 1);
      TablePlacement placement;
      if (where == "replicated") {
        placement = TABLE_REPLICATED;
      } else if (where == "sharded") {
        placement = TABLE_SHARDED;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--table_placements: \"", entry,
                         "\" is not NAME:replicated or NAME:sharded"));
      }
      const std::string table(entry.substr(0, colon));
      if (auto [it, inserted] = named.try_emplace(table, entry); !inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--table_placements names table \"", table, "\" twice (\"",
            it->second, "\" and \"", entry, "\"): give each table once"));
      }
      (*job->mutable_table_placements())[table] = placement;
    }
  }
  return absl::OkStatus();
}

// --epochs, --steps_per_epoch, --batch_size and --seed.
void ApplyScheduleFlags(const FlagUse& use, JobConfig* job) {
  ScheduleConfig* schedule = job->mutable_schedule();
  if (use("epochs")) schedule->set_epochs(FLAGS_epochs);
  if (use("steps_per_epoch"))
    schedule->set_steps_per_epoch(FLAGS_steps_per_epoch);
  if (use("batch_size")) schedule->set_batch_size(FLAGS_batch_size);
  if (use("seed")) schedule->set_seed(FLAGS_seed);
}

absl::Status ApplyFlags(bool only_explicit, JobConfig* job) {
  const FlagUse use{only_explicit};
  // In this order: a command line with several bad flags names the same
  // one first as it always has.
  for (absl::Status (*apply)(const FlagUse&, JobConfig*) :
       {ApplyModelFlags, ApplyDataFlags, ApplyOptimizerFlags,
        ApplyLearningRateFlags, ApplyTableUpdatesFlag, ApplyClippingFlags}) {
    if (absl::Status s = apply(use, job); !s.ok()) return s;
  }
  ApplyPartitionerFlags(use, job);
  ApplyModeFlags(use, job);
  if (absl::Status s = ApplyTableFlags(use, job); !s.ok()) return s;
  ApplyScheduleFlags(use, job);
  return absl::OkStatus();
}

// Writes the preset's description into model_def, unless the job describes
// its model already; then the preset's flags would be silently ignored, so
// giving one is an error.
absl::Status ResolveModel(JobConfig* job) {
  if (job->has_model_def()) {
    for (const char* flag :
         {"model", "hidden_units", "dropout", "embedding_dim", "num_fields",
          "num_dense", "vocab_size", "combiner"}) {
      if (Explicit(flag)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag, " shapes a preset model, but the job file describes ",
            "its model (model_def): change the description instead"));
      }
    }
    job->clear_model();
    return absl::OkStatus();
  }
  absl::StatusOr<ModelDef> model = PresetModel(job->model());
  if (!model.ok()) return model.status();
  *job->mutable_model_def() = *std::move(model);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobConfig> JobConfigFromFlags() {
  // Start from every flag's value (defaults included), lay the file over
  // it (fields the file leaves unset keep the flag default), then the
  // flags given explicitly on the command line.
  JobConfig job;
  if (absl::Status s = ApplyFlags(/*only_explicit=*/false, &job); !s.ok()) {
    return s;
  }
  if (FLAGS_job_file.empty()) {
    if (absl::Status s = ResolveModel(&job); !s.ok()) return s;
    return job;
  }
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
  if (absl::Status s = ResolveModel(&job); !s.ok()) return s;
  return job;
}

}  // namespace tessera
