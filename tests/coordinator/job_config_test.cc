#include "coordinator/job_config.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/counter_rng.h"
#include "coordinator/job_flags.h"
#include "coordinator/report/progress_meter.h"
#include "coordinator/variable_plan.h"
#include "gflags/gflags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/written_text.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

// Every test runs with the flags restored afterwards.
class JobConfigTest : public ::testing::Test {
 protected:
  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "/job_config_test_" + name;
    std::ofstream(path) << text;
    return path;
  }

  JobConfig Defaults() {
    absl::StatusOr<JobConfig> job = JobConfigFromFlags();
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : JobConfig();
  }

  gflags::FlagSaver saver_;
};

TEST_F(JobConfigTest, FlagDefaults) {
  const JobConfig job = Defaults();
  EXPECT_TRUE(job.optimizer().has_adam());
  EXPECT_FLOAT_EQ(job.optimizer().learning_rate(), 0.001f);
  EXPECT_FLOAT_EQ(job.optimizer().adam().beta1(), 0.9f);
  EXPECT_FLOAT_EQ(job.optimizer().adam().beta2(), 0.999f);
  EXPECT_EQ(job.partitioner().kind(), "fixed");
  EXPECT_EQ(job.partitioner().num_shards(), 2);
  EXPECT_EQ(job.model().kind(), "mlp");
  EXPECT_EQ(job.model().input_dim(), 784);
  EXPECT_THAT(job.model().hidden_units(), ElementsAre(128));
  EXPECT_EQ(job.model().num_classes(), 10);
  EXPECT_FLOAT_EQ(job.model().dropout(), 0.2f);
  EXPECT_EQ(job.mode(), "async");
  EXPECT_EQ(job.schedule().epochs(), 10);
  EXPECT_EQ(job.schedule().batch_size(), 64);
  EXPECT_EQ(job.schedule().steps_per_epoch(), 0);
  EXPECT_EQ(job.schedule().seed(), 42u);
  EXPECT_THAT(job.data().train_images(),
              EndsWith("train-images-idx3-ubyte.gz"));
  EXPECT_THAT(job.data().test_labels(), EndsWith("t10k-labels-idx1-ubyte.gz"));
  EXPECT_TRUE(ValidateJobConfig(job).ok()) << ValidateJobConfig(job);
}

TEST_F(JobConfigTest, FlagsWithoutFileApply) {
  gflags::SetCommandLineOption("optimizer", "momentum");
  gflags::SetCommandLineOption("hidden_units", "32, 16");
  gflags::SetCommandLineOption("partitioner", "none");
  const JobConfig job = Defaults();
  EXPECT_FLOAT_EQ(job.optimizer().momentum().momentum(), 0.9f);
  EXPECT_THAT(job.model().hidden_units(), ElementsAre(32, 16));
  EXPECT_EQ(job.partitioner().kind(), "none");
}

TEST_F(JobConfigTest, BadFlagsNameTheFlag) {
  gflags::SetCommandLineOption("optimizer", "rmsprop");
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr("--optimizer"));

  gflags::SetCommandLineOption("optimizer", "sgd");
  gflags::SetCommandLineOption("hidden_units", "12,x");
  job = JobConfigFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr("--hidden_units"));
}

TEST_F(JobConfigTest, JobFileWithExplicitFlagsOnTop) {
  const std::string path = WriteFile("override.txt", R"pb(
    model {
      kind: "mlp"
      input_dim: 20
      hidden_units: 16
      hidden_units: 8
      num_classes: 4
      dropout: 0.1
    }
    optimizer {
      learning_rate: 0.05
      sgd {}
    }
    partitioner { kind: "min_size" min_shard_bytes: 1024 max_shards: 3 }
    mode: "async"
    schedule { epochs: 3 batch_size: 32 seed: 7 }
  )pb");
  gflags::SetCommandLineOption("job_file", path.c_str());
  gflags::SetCommandLineOption("epochs", "5");
  gflags::SetCommandLineOption("hidden_units", "64");
  // Explicit even though it equals the default: it still wins.
  gflags::SetCommandLineOption("seed", "42");
  const JobConfig job = Defaults();
  EXPECT_EQ(job.schedule().epochs(), 5);
  EXPECT_EQ(job.schedule().seed(), 42u);
  EXPECT_EQ(job.schedule().batch_size(), 32);  // file, not the flag default
  EXPECT_THAT(job.model().hidden_units(), ElementsAre(64));
  EXPECT_EQ(job.model().input_dim(), 20);
  EXPECT_EQ(job.model().num_classes(), 4);
  EXPECT_FLOAT_EQ(job.model().dropout(), 0.1f);
  EXPECT_TRUE(job.optimizer().has_sgd());
  EXPECT_FLOAT_EQ(job.optimizer().learning_rate(), 0.05f);
  EXPECT_EQ(job.partitioner().kind(), "min_size");
  EXPECT_EQ(job.partitioner().num_shards(), 2);  // flag default, unused
  EXPECT_EQ(job.partitioner().max_shards(), 3);
  EXPECT_TRUE(ValidateJobConfig(job).ok()) << ValidateJobConfig(job);
}

TEST_F(JobConfigTest, FieldsTheFileLeavesOutKeepFlagDefaults) {
  const std::string path = WriteFile("partial.txt", R"pb(
    optimizer { adam {} }
    model { hidden_units: 64 hidden_units: 32 }
  )pb");
  gflags::SetCommandLineOption("job_file", path.c_str());
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(ValidateJobConfig(*job).ok()) << ValidateJobConfig(*job);
  EXPECT_EQ(job->schedule().epochs(), 10);
  EXPECT_EQ(job->mode(), "async");
  EXPECT_FLOAT_EQ(job->optimizer().adam().beta1(), 0.9f);
  EXPECT_FLOAT_EQ(job->optimizer().learning_rate(), 0.001f);
  ASSERT_EQ(job->model().hidden_units_size(), 2);
  EXPECT_EQ(job->model().hidden_units(0), 64);
  EXPECT_EQ(job->model().hidden_units(1), 32);
}

TEST_F(JobConfigTest, MalformedJobFileNamesFileAndLine) {
  const std::string path = WriteFile("malformed.txt",
                                     "model { kind: \"mlp\" }\n"
                                     "schedule { epochs: oops }\n");
  absl::StatusOr<JobConfig> read = ReadJobFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(),
              AllOf(HasSubstr(path), HasSubstr("line 2")));

  gflags::SetCommandLineOption("job_file", path.c_str());
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr("line 2"));

  const std::string unknown =
      WriteFile("unknown.txt", "mode: \"async\"\n\nno_such_field: 1\n");
  EXPECT_THAT(ReadJobFile(unknown).status().message(),
              AllOf(HasSubstr(unknown), HasSubstr("line 3")));
}

TEST_F(JobConfigTest, UnknownDataFormatInAJobFileNamesTheField) {
  const std::string path =
      WriteFile("parquet", R"pb(data { format: "parquet" })pb");
  gflags::SetCommandLineOption("job_file", path.c_str());
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(job.status().message());
  // Not the flag the user never gave: the file and its field.
  EXPECT_THAT(message, Not(HasSubstr("--data_format")));
  EXPECT_THAT(message,
              HasSubstr(absl::StrCat("job file ", path, ": data { format }")));
  EXPECT_THAT(message, HasSubstr("\"parquet\""));
  EXPECT_THAT(message, HasSubstr("idx, criteo, tfrecord and csv"));

  gflags::SetCommandLineOption("data_format", "parquet");
  job = JobConfigFromFlags();
  EXPECT_THAT(job.status().message(), HasSubstr("--data_format"));
}

TEST_F(JobConfigTest, MissingJobFileIsNotFound) {
  const std::string path = ::testing::TempDir() + "/no_such_job_file.txt";
  absl::StatusOr<JobConfig> read = ReadJobFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr(path));
}

TEST_F(JobConfigTest, ValidateNamesTheBadField) {
  const JobConfig good = Defaults();
  struct Case {
    std::string field;
    void (*mutate)(JobConfig*);
  };
  const std::vector<Case> cases = {
      {"epochs", [](JobConfig* j) { j->mutable_schedule()->set_epochs(0); }},
      {"batch_size",
       [](JobConfig* j) { j->mutable_schedule()->set_batch_size(0); }},
      {"steps_per_epoch",
       [](JobConfig* j) { j->mutable_schedule()->set_steps_per_epoch(-1); }},
      // Plans that would not fit in memory.
      {"batch_size must be at most",
       [](JobConfig* j) { j->mutable_schedule()->set_batch_size(2000000000); }},
      {"plans more than",
       [](JobConfig* j) {
         j->mutable_schedule()->set_steps_per_epoch(int64_t{1} << 40);
       }},
      {"mode", [](JobConfig* j) { j->set_mode("sync_everything"); }},
      {"optimizer.learning_rate",
       [](JobConfig* j) { j->mutable_optimizer()->set_learning_rate(0); }},
      {"optimizer.adam",
       [](JobConfig* j) {
         j->mutable_optimizer()->mutable_adam()->set_beta1(1.5f);
       }},
      {"optimizer", [](JobConfig* j) { j->mutable_optimizer()->clear_kind(); }},
      {"dropout_0",
       [](JobConfig* j) {
         j->mutable_model_def()->mutable_layers(1)->mutable_dropout()->set_rate(
             1.0f);
       }},
  };
  for (const Case& c : cases) {
    JobConfig job = good;
    c.mutate(&job);
    const absl::Status s = ValidateJobConfig(job);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), HasSubstr(c.field));
  }
}

// The presets become descriptions: the flags' model is written into
// model_def, with the compiled models' variable names.
// Values that were accepted unchecked (a negative or NaN embedding
// learning rate was silently replaced by --learning_rate; max_shards was
// read only by the max_size partitioner).
TEST_F(JobConfigTest, UncheckedValuesAreRefusedByName) {
  for (const char* value : {"-1", "nan", "inf"}) {
    gflags::FlagSaver saver;
    gflags::SetCommandLineOption("embedding_learning_rate", value);
    absl::StatusOr<JobConfig> job = JobConfigFromFlags();
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument) << value;
    EXPECT_THAT(std::string(job.status().message()),
                HasSubstr("--embedding_learning_rate must be a finite"));
  }
  gflags::SetCommandLineOption("max_shards", "-1");
  const JobConfig job = Defaults();
  const absl::Status s = ValidateJobConfig(job);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_shards"));
}

TEST_F(JobConfigTest, PresetFlagsBecomeADescription) {
  gflags::SetCommandLineOption("hidden_units", "32,16");
  const JobConfig job = Defaults();
  ASSERT_TRUE(job.has_model_def());
  ASSERT_EQ(job.model_def().layers_size(), 5);
  EXPECT_EQ(job.model_def().layers(0).name(), "dense_0");
  EXPECT_EQ(job.model_def().layers(0).dense().units(), 32);
  EXPECT_EQ(job.model_def().layers(4).dense().units(), 10);
  EXPECT_EQ(job.model_def().loss().kind(), LossDef::SOFTMAX_CROSS_ENTROPY);
}

// Every job file shipped in deploy/jobs reads, validates and places its
// variables.
TEST_F(JobConfigTest, ShippedJobFilesAreValid) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(
           absl::StrCat(TESSERA_SOURCE_DIR, "/deploy/jobs"))) {
    if (entry.path().extension() != ".textproto") continue;
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    std::ifstream file(path);
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    gflags::FlagSaver saver;
    gflags::SetCommandLineOption("job_file", path.c_str());
    if (absl::StrContains(text, "format: \"criteo\"")) {
      gflags::SetCommandLineOption("data_dir", "/tmp/ctr");
    }
    absl::StatusOr<JobConfig> job = JobConfigFromFlags();
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_FALSE(job->has_model()) << "a description replaces the preset";
    ASSERT_TRUE(ValidateJobConfig(*job).ok()) << ValidateJobConfig(*job);
    absl::StatusOr<VariablePlan> plan = PlanVariables(*job, 2);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_FALSE(plan->variables.empty());
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

// A table of table_optimizers gets a CreateShards request with its own
// optimizer; the other tables keep embedding_optimizer.
TEST_F(JobConfigTest, TableOptimizersGiveATableItsOwnRequest) {
  const std::string path = WriteFile("table_optimizers", R"pb(
    model_def {
      inputs {
        name: "c"
        sparse {}
      }
      label { kind: BINARY }
      layers {
        name: "wide"
        inputs: "c"
        embedding_bag { dim: 1 }
      }
      layers {
        name: "deep"
        inputs: "c"
        embedding_bag { dim: 4 }
      }
      layers {
        name: "out"
        inputs: [ "wide", "deep" ]
        dense { units: 1 }
      }
      loss { kind: SIGMOID_CROSS_ENTROPY input: "out" }
    }
    data { format: "criteo" }
    optimizer {
      learning_rate: 0.001
      adam {}
    }
    embedding_optimizer {
      learning_rate: 0.05
      adagrad {}
    }
    table_optimizers {
      key: "wide"
      value {
        learning_rate: 0.5
        sgd {}
      }
    }
  )pb");
  gflags::SetCommandLineOption("job_file", path.c_str());
  gflags::SetCommandLineOption("data_dir", "/tmp/ctr");
  JobConfig job = Defaults();
  ASSERT_TRUE(ValidateJobConfig(job).ok()) << ValidateJobConfig(job);
  absl::StatusOr<VariablePlan> plan = PlanVariables(job, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<std::vector<CreateShardsRequest>> requests =
      ShardRequestsByKind(*plan, job, 1);
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0].size(), 3u);
  EXPECT_TRUE(requests[0][0].optimizer().has_adagrad());
  ASSERT_EQ(requests[0][0].shards_size(), 1);
  EXPECT_EQ(requests[0][0].shards(0).variable(), "deep");
  EXPECT_TRUE(requests[0][1].optimizer().has_adam());
  EXPECT_TRUE(requests[0][2].optimizer().has_sgd());
  ASSERT_EQ(requests[0][2].shards_size(), 1);
  EXPECT_EQ(requests[0][2].shards(0).variable(), "wide");

  (*job.mutable_table_optimizers())["wdie"] = job.table_optimizers().at("wide");
  const absl::Status s = ValidateJobConfig(job);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"wdie\" is not a table"));
}

// The mlp job file is the default preset written out: the same variables.
TEST_F(JobConfigTest, MlpJobFileIsTheDefaultPreset) {
  absl::StatusOr<VariablePlan> preset = PlanVariables(Defaults(), 2);
  gflags::SetCommandLineOption(
      "job_file", absl::StrCat(TESSERA_SOURCE_DIR,
                               "/deploy/jobs/mlp_fashion_mnist.textproto")
                      .c_str());
  absl::StatusOr<VariablePlan> file = PlanVariables(Defaults(), 2);
  ASSERT_TRUE(preset.ok() && file.ok());
  ASSERT_EQ(preset->variables.size(), file->variables.size());
  for (size_t i = 0; i < file->variables.size(); ++i) {
    EXPECT_EQ(preset->variables[i].name, file->variables[i].name);
    EXPECT_EQ(preset->variables[i].initializer.SerializeAsString(),
              file->variables[i].initializer.SerializeAsString());
  }
}

// A preset's flag beside a description would be ignored: it is refused.
TEST_F(JobConfigTest, PresetFlagBesideADescriptionIsRefused) {
  const std::string path = WriteFile("described", R"pb(
    model_def {
      inputs {
        name: "x"
        dense { shape: [ 784 ] }
      }
      label { kind: CLASS_INDEX num_classes: 10 }
      layers {
        name: "out"
        inputs: "x"
        dense { units: 10 }
      }
      loss { kind: SOFTMAX_CROSS_ENTROPY input: "out" }
    }
  )pb");
  gflags::SetCommandLineOption("job_file", path.c_str());
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(ValidateJobConfig(*job).ok());
  gflags::SetCommandLineOption("hidden_units", "64");
  job = JobConfigFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(),
              AllOf(HasSubstr("--hidden_units"), HasSubstr("model_def")));
}

// Bad descriptions are refused before anything starts, naming what is
// wrong: a text-format error with its line, an unknown tensor, a cycle, a
// shape mismatch, a loss that does not fit the label, a mode that cannot
// train tables, a data format that cannot feed the inputs.
TEST_F(JobConfigTest, BadDescriptionsAreNamed) {
  const std::string head = R"pb(
    model_def { inputs {
      name: "x"
      dense { shape: [ 784 ] }
    }
                label { kind: CLASS_INDEX num_classes: 10 }
  )pb";
  const std::string misspelt =
      head + "layers { name: \"out\" inputs: \"x\" dense { unitz: 10 } } }";
  const std::string parse = WriteFile("misspelt", misspelt);
  // The misspelt field is on the text's last line.
  const int64_t line = std::count(misspelt.begin(), misspelt.end(), '\n') + 1;
  gflags::SetCommandLineOption("job_file", parse.c_str());
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(job.status().message()),
              AllOf(HasSubstr(parse), HasSubstr(absl::StrCat("line ", line)),
                    HasSubstr("unitz")));

  struct Case {
    std::string name, body, expected;
  };
  const std::vector<Case> cases = {
      {"unknown", R"pb(
         layers {
           name: "out"
           inputs: "y"
           dense { units: 10 }
         }
         loss { kind: SOFTMAX_CROSS_ENTROPY input: "out" })pb",
       "reads tensor \"y\", which no input or layer writes"},
      {"cycle", R"pb(
         layers {
           name: "a"
           inputs: "b"
           dense { units: 10 }
         }
         layers {
           name: "b"
           inputs: "a"
           dense { units: 10 }
         }
         loss { kind: SOFTMAX_CROSS_ENTROPY input: "b" })pb",
       "cycle"},
      {"shape", R"pb(
         layers {
           name: "a"
           inputs: "x"
           dense { units: 10 }
         }
         layers {
           name: "s"
           inputs: [ "a", "x" ]
           add {}
         }
         loss { kind: SOFTMAX_CROSS_ENTROPY input: "s" })pb",
       "layer \"s\""},
      {"loss", R"pb(
         layers {
           name: "out"
           inputs: "x"
           dense { units: 10 }
         }
         loss { kind: SIGMOID_CROSS_ENTROPY input: "out" })pb",
       "sigmoid_cross_entropy needs a binary label"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    gflags::SetCommandLineOption(
        "job_file", WriteFile(c.name, head + c.body + "}").c_str());
    job = JobConfigFromFlags();
    ASSERT_TRUE(job.ok()) << job.status();
    absl::Status s = ValidateJobConfig(*job);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.expected));
  }

  // Tables in mirrored mode (sync takes them, #30); sparse inputs from IDX
  // files.
  gflags::SetCommandLineOption("job_file", "");
  gflags::SetCommandLineOption("model", "ctr");
  gflags::SetCommandLineOption("data_dir", "/tmp/ctr");
  gflags::SetCommandLineOption("mode", "sync");
  job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  absl::Status s = ValidateJobConfig(*job);
  EXPECT_TRUE(s.ok()) << s;
  gflags::SetCommandLineOption("mode", "mirrored");
  job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  s = ValidateJobConfig(*job);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("embedding_0"), HasSubstr("mode sync"),
                    HasSubstr("mode hybrid")));
  gflags::SetCommandLineOption("mode", "hybrid:sync");
  job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  s = ValidateJobConfig(*job);
  EXPECT_TRUE(s.ok()) << s;
  gflags::SetCommandLineOption("mode", "async");
  gflags::SetCommandLineOption("data_format", "idx");
  job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  s = ValidateJobConfig(*job);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("data format \"idx\""));
}

// BatchNorm's moving statistics get a CreateShards request of their own,
// with their moving-average rule, beside the dense layers' optimizer.
TEST_F(JobConfigTest, MovingStatisticsAreCreatedWithTheirRule) {
  const std::string path = WriteFile("batch_norm", R"pb(
    model_def {
      inputs {
        name: "x"
        dense { shape: [ 784 ] }
      }
      label { kind: CLASS_INDEX num_classes: 10 }
      layers {
        name: "h"
        inputs: "x"
        dense { units: 8 }
      }
      layers {
        name: "bn"
        inputs: "h"
        batch_norm { momentum: 0.9 }
      }
      layers {
        name: "out"
        inputs: "bn"
        dense { units: 10 }
      }
      loss { kind: SOFTMAX_CROSS_ENTROPY input: "out" }
    }
    partitioner { kind: "none" }
  )pb");
  gflags::SetCommandLineOption("job_file", path.c_str());
  const JobConfig job = Defaults();
  absl::StatusOr<VariablePlan> plan = PlanVariables(job, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<std::vector<CreateShardsRequest>> requests =
      ShardRequestsByKind(*plan, job, 1);
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0].size(), 2u);
  EXPECT_TRUE(requests[0][0].optimizer().has_adam());
  EXPECT_EQ(requests[0][0].shards_size(), 6);  // kernels, biases, gamma, beta
  const CreateShardsRequest& moving = requests[0][1];
  EXPECT_FLOAT_EQ(moving.optimizer().moving_average().momentum(), 0.9f);
  ASSERT_EQ(moving.shards_size(), 2);
  EXPECT_EQ(moving.shards(0).variable(), "bn/moving_mean");
  EXPECT_EQ(moving.shards(0).initializer().kind(), Initializer::ZEROS);
  EXPECT_EQ(moving.shards(1).variable(), "bn/moving_variance");
  EXPECT_EQ(moving.shards(1).initializer().kind(), Initializer::ONES);
}

TEST_F(JobConfigTest, PlanFixedTwoShardsOverTwoPs) {
  const JobConfig job = Defaults();
  absl::StatusOr<VariablePlan> plan = PlanVariables(job, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->variables.size(), 4u);
  EXPECT_EQ(plan->variables[0].initializer.seed(), DeriveSeed(42, 0));
  ASSERT_EQ(plan->shards.size(), 8u);
  struct Want {
    std::string name;
    int64_t offset;
    std::vector<int64_t> shape;
    int ps;
  };
  const std::vector<Want> want = {
      {"dense_0/kernel/part_0", 0, {392, 128}, 0},
      {"dense_0/kernel/part_1", 392, {392, 128}, 1},
      {"dense_0/bias/part_0", 0, {64}, 0},
      {"dense_0/bias/part_1", 64, {64}, 1},
      {"dense_1/kernel/part_0", 0, {64, 10}, 0},
      {"dense_1/kernel/part_1", 64, {64, 10}, 1},
      {"dense_1/bias/part_0", 0, {5}, 0},
      {"dense_1/bias/part_1", 5, {5}, 1},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(plan->shards[i].name, want[i].name);
    EXPECT_EQ(plan->shards[i].row_offset, want[i].offset) << want[i].name;
    EXPECT_EQ(plan->shards[i].shape, want[i].shape) << want[i].name;
    EXPECT_EQ(plan->shards[i].ps_task, want[i].ps) << want[i].name;
  }

  const std::vector<CreateShardsRequest> requests =
      ShardRequests(*plan, job.optimizer(), 2);
  ASSERT_EQ(requests.size(), 2u);
  for (const CreateShardsRequest& r : requests) {
    EXPECT_TRUE(r.optimizer().has_adam());
    ASSERT_EQ(r.shards_size(), 4);
  }
  const ShardDef& kernel1 = requests[1].shards(0);
  EXPECT_EQ(kernel1.name(), "dense_0/kernel/part_1");
  EXPECT_EQ(kernel1.row_offset(), 392);
  EXPECT_THAT(kernel1.variable_shape().dims(), ElementsAre(784, 128));
  EXPECT_THAT(kernel1.shape().dims(), ElementsAre(392, 128));
  EXPECT_EQ(kernel1.initializer().fan_in(), 784);

  const std::vector<VariablePlacement> placements = Placements(*plan);
  ASSERT_EQ(placements.size(), 4u);
  EXPECT_EQ(placements[0].name(), "dense_0/kernel");
  ASSERT_EQ(placements[0].shards_size(), 2);
  EXPECT_EQ(placements[0].shards(1).rows(), 392);
  EXPECT_EQ(placements[0].shards(1).ps_task(), 1);
}

TEST_F(JobConfigTest, PlanUnevenSplitSharesOnePlacementCounter) {
  JobConfig job = Defaults();
  job.mutable_partitioner()->set_num_shards(3);
  absl::StatusOr<VariablePlan> plan = PlanVariables(job, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<int64_t> rows;
  std::vector<int> ps;
  for (int i = 0; i < 6; ++i) {
    rows.push_back(plan->shards[i].rows);
    ps.push_back(plan->shards[i].ps_task);
  }
  EXPECT_THAT(rows, ElementsAre(262, 261, 261, 43, 43, 42));
  EXPECT_THAT(ps, ElementsAre(0, 1, 0, 1, 0, 1));
}

TEST(ProgressMeterTest, FormatEta) {
  EXPECT_EQ(ProgressMeter::FormatEta(absl::ZeroDuration()), "00:00");
  EXPECT_EQ(ProgressMeter::FormatEta(absl::Seconds(65)), "01:05");
  EXPECT_EQ(ProgressMeter::FormatEta(absl::Milliseconds(1900)), "00:01");
  EXPECT_EQ(ProgressMeter::FormatEta(absl::Seconds(3599)), "59:59");
  EXPECT_EQ(ProgressMeter::FormatEta(absl::Seconds(3600)), "1:00:00");
  EXPECT_EQ(ProgressMeter::FormatEta(absl::Seconds(3723)), "1:02:03");
  EXPECT_EQ(ProgressMeter::FormatEta(absl::Hours(100)), "100:00:00");
  EXPECT_EQ(ProgressMeter::FormatEta(absl::Seconds(-1)), "--:--");
  EXPECT_EQ(ProgressMeter::FormatEta(absl::InfiniteDuration()), "--:--");
}

TEST(ProgressMeterTest, CountsStepsAndWritesFinalLine) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    ProgressMeter meter(out, "epoch 1", 3);
    meter.Step(10, 1.0);
    meter.Step(10, 2.0);
    meter.Step(5, 3.0);
    EXPECT_EQ(meter.steps(), 3);
    EXPECT_EQ(meter.examples(), 25);
    EXPECT_DOUBLE_EQ(meter.mean_loss(), 2.0);
    meter.Finish();
  }
  const std::string text = WrittenText(out);
  std::fclose(out);
  EXPECT_THAT(text, AllOf(HasSubstr("epoch 1"), HasSubstr("3/3 steps"),
                          HasSubstr("took")));
}

// Issue #33, defect 11: in sync and mirrored modes the line counts global
// steps (a step per worker each), as the job's log does; it showed the
// workers' steps, twice the global steps of two workers.
TEST(ProgressMeterTest, LockstepModesCountGlobalSteps) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    ProgressMeter meter(out, "epoch 1/1", 6, /*per_shown=*/2);
    for (int i = 0; i < 6; ++i) meter.Step(32, 1.0);
    EXPECT_EQ(meter.steps(), 6);  // the epoch's figures still add them all
    meter.Finish();
  }
  const std::string text = WrittenText(out);
  std::fclose(out);
  EXPECT_THAT(text, HasSubstr("3/3 global steps"));
  EXPECT_THAT(text, Not(HasSubstr("6/6")));
}

// --job_file was read whole, whatever its size: /dev/zero read until memory
// ran out.
TEST_F(JobConfigTest, EndlessJobFileIsRefusedAtTheCap) {
  absl::StatusOr<JobConfig> read = ReadJobFile("/dev/zero");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(),
              HasSubstr("job file /dev/zero is larger than 1048576 bytes"));
}

TEST_F(JobConfigTest, MovingAverageIsNotAJobsOptimizer) {
  JobConfig job = Defaults();
  job.mutable_optimizer()->mutable_moving_average()->set_momentum(0.9f);
  absl::Status s = ValidateJobConfig(job);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("moving_average is not an optimizer"));
}

// Issue #42, defect 2: --table_updates sets the rule of every optimizer a
// table may train with, and a name it does not know is refused.
TEST_F(JobConfigTest, TableUpdatesFlagSetsEveryTablesOptimizer) {
  gflags::SetCommandLineOption("embedding_optimizer", "adagrad");
  gflags::SetCommandLineOption("table_updates", "dense");
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->optimizer().table_updates(), TABLE_UPDATES_DENSE);
  EXPECT_EQ(job->embedding_optimizer().table_updates(), TABLE_UPDATES_DENSE);
  gflags::SetCommandLineOption("table_updates", "sparse");
  job = JobConfigFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(),
              HasSubstr("--table_updates: \"sparse\" is neither lazy nor "
                        "dense"));
}

// --embedding_learning_rate alone changes the tables' rate, not their
// optimizer: a job file's Adagrad tables stayed Adam (--optimizer's default)
// once the rate was given on the command line.
TEST_F(JobConfigTest, EmbeddingLearningRateAloneKeepsTheTablesOptimizer) {
  gflags::SetCommandLineOption(
      "job_file",
      absl::StrCat(TESSERA_SOURCE_DIR, "/deploy/jobs/dlrm.textproto").c_str());
  gflags::SetCommandLineOption("data_dir", "/tmp/ctr");
  absl::StatusOr<JobConfig> before = JobConfigFromFlags();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(before->has_embedding_optimizer());
  gflags::SetCommandLineOption("embedding_learning_rate", "0.07");
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->embedding_optimizer().kind_case(),
            before->embedding_optimizer().kind_case());
  EXPECT_FLOAT_EQ(job->embedding_optimizer().learning_rate(), 0.07f);

  // Without a tables' optimizer in the job, the rate goes to a copy of the
  // dense optimizer, its kind and options kept.
  gflags::SetCommandLineOption("job_file", "");
  gflags::SetCommandLineOption("data_dir", "/usr/share/datasets/fashion-mnist");
  gflags::SetCommandLineOption("optimizer", "momentum");
  job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->embedding_optimizer().has_momentum());
  EXPECT_FLOAT_EQ(job->embedding_optimizer().learning_rate(), 0.07f);
}

// Issue #44 item 3: the clipping flags set every optimizer's clipping as
// Keras' clipvalue, clipnorm and global_clipnorm; bad values and two at
// once are refused by name, in flags and in a job file alike.
TEST_F(JobConfigTest, ClippingFlagsSetEveryOptimizersClipping) {
  JobConfig file = Defaults();
  file.mutable_optimizer()->mutable_clipping()->set_norm(1.0f);
  file.mutable_optimizer()->mutable_clipping()->set_value(2.0f);
  absl::Status s = ValidateJobConfig(file);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("optimizer.clipping: set at most one"));

  gflags::SetCommandLineOption("embedding_optimizer", "adagrad");
  gflags::SetCommandLineOption("global_clip_norm", "1.5");
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->optimizer().clipping().global_norm(), 1.5f);
  EXPECT_EQ(job->embedding_optimizer().clipping().global_norm(), 1.5f);
  EXPECT_EQ(job->optimizer().clipping().norm(), 0.0f);
  EXPECT_TRUE(ValidateJobConfig(*job).ok());

  gflags::SetCommandLineOption("clip_value", "0.5");
  job = JobConfigFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(),
              HasSubstr("at most one of --clip_value, --clip_norm"));
  gflags::SetCommandLineOption("global_clip_norm", "0");
  gflags::SetCommandLineOption("clip_value", "-1");
  job = JobConfigFromFlags();
  EXPECT_THAT(job.status().message(),
              HasSubstr("--clip_value must be a finite number >= 0"));
}

// Issue #42, defect 14: in --table_placements=t:replicated,t:sharded the
// last silently won.
TEST_F(JobConfigTest, ATableNamedTwiceInTablePlacementsIsRefused) {
  gflags::SetCommandLineOption("table_placements",
                               "t:replicated,u:sharded,t:sharded");
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(),
              HasSubstr("--table_placements names table \"t\" twice"));
  gflags::SetCommandLineOption("table_placements", "t:replicated,u:sharded");
  job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->table_placements().at("t"), TABLE_REPLICATED);
}

// Issue #42, defects 5 and 10: what the workers' count decides was found
// only once the cluster ran; the coordinator's main (and its dry run) now
// asks this before anything starts.
TEST_F(JobConfigTest, WhatTheWorkersCountDecidesIsRefusedNamingTheFlag) {
  JobConfig job = Defaults();
  job.set_mode("sync");
  job.mutable_schedule()->set_batch_size(255);
  const TrainingMode sync = *ParseTrainingMode("sync");
  absl::Status s = ValidateJobForWorkers(job, sync, 2, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("--batch_size"), HasSubstr("255"),
                                 HasSubstr("split evenly over the 2 workers")));
  EXPECT_TRUE(ValidateJobForWorkers(job, sync, 3, false).ok());
  // Asynchronous steps are each a worker's own batch.
  EXPECT_TRUE(
      ValidateJobForWorkers(job, *ParseTrainingMode("async"), 2, false).ok());

  job.mutable_schedule()->set_batch_size(256);
  job.set_backup_workers(2);
  s = ValidateJobForWorkers(job, sync, 2, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("--backup_workers"),
                    HasSubstr("is 2 but there are only 2 workers")));
  EXPECT_TRUE(ValidateJobForWorkers(job, sync, 4, false).ok());

  job.set_backup_workers(0);
  // Every mode removes a lost worker (#48: a replica's ring shrinks).
  for (const char* mode :
       {"async", "sync", "ssp:2", "mirrored", "hybrid", "hybrid:sync"}) {
    EXPECT_TRUE(
        ValidateJobForWorkers(job, *ParseTrainingMode(mode), 2, true).ok())
        << mode;
  }
}

}  // namespace
}  // namespace tessera
