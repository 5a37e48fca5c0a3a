// Issue #44: the learning-rate flags, the linear scaling rule, and the
// rates the coordinator shows (progress line, tessera_ctl status, the run
// folder's metrics).
#include "coordinator/learning_rates.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "coordinator/control/status_text.h"
#include "coordinator/job_config.h"
#include "coordinator/job_flags.h"
#include "coordinator/report/metrics_writer.h"
#include "gflags/gflags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TrainingMode Mode(const char* text) {
  absl::StatusOr<TrainingMode> mode = ParseTrainingMode(text);
  EXPECT_TRUE(mode.ok()) << mode.status();
  return mode.ok() ? *mode : TrainingMode();
}

JobConfig Job(int64_t batch) {
  JobConfig job;
  job.mutable_schedule()->set_batch_size(batch);
  job.mutable_optimizer()->set_learning_rate(0.01f);
  job.mutable_optimizer()->mutable_adam();
  return job;
}

class LearningRateFlagsTest : public ::testing::Test {
 protected:
  gflags::FlagSaver saver_;
};

TEST_F(LearningRateFlagsTest, SchedulesAndWeightDecayFromTheFlags) {
  gflags::SetCommandLineOption(
      "lr_schedule", "cosine,warmup_steps=100,decay_steps=1000,alpha=0.1");
  gflags::SetCommandLineOption("weight_decay", "0.004");
  gflags::SetCommandLineOption(
      "embedding_lr_schedule",
      "piecewise,boundaries=500:900,values=0.1:0.05:0.01");
  absl::StatusOr<JobConfig> job = JobConfigFromFlags();
  ASSERT_TRUE(job.ok()) << job.status();
  const LearningRateSchedule& dense = job->optimizer().schedule();
  EXPECT_EQ(dense.decay(), LearningRateSchedule::DECAY_COSINE);
  EXPECT_EQ(dense.warmup_steps(), 100);
  EXPECT_EQ(dense.decay_steps(), 1000);
  EXPECT_FLOAT_EQ(dense.alpha(), 0.1f);
  EXPECT_FLOAT_EQ(job->optimizer().weight_decay(), 0.004f);
  // The tables had no optimizer of their own: they get a copy of the
  // dense one with their schedule.
  ASSERT_TRUE(job->has_embedding_optimizer());
  EXPECT_TRUE(job->embedding_optimizer().has_adam());
  EXPECT_EQ(job->embedding_optimizer().schedule().decay(),
            LearningRateSchedule::DECAY_PIECEWISE);
  EXPECT_THAT(job->embedding_optimizer().schedule().values(),
              ::testing::ElementsAre(0.1f, 0.05f, 0.01f));
  EXPECT_TRUE(ValidateJobConfig(*job).ok()) << ValidateJobConfig(*job);
}

TEST_F(LearningRateFlagsTest, BadFlagsAreRefusedByName) {
  struct Case {
    const char* flag;
    const char* value;
    const char* says;
  };
  const Case cases[] = {
      {"lr_schedule", "cosine", "--lr_schedule.decay_steps must be > 0"},
      {"lr_schedule", "cosine,decay_steps=x",
       "--lr_schedule: \"decay_steps=x\": decay_steps must be an integer"},
      {"embedding_lr_schedule", "triangle",
       "--embedding_lr_schedule: \"triangle\" is not a decay"},
      {"weight_decay", "-0.1", "--weight_decay must be a finite number >= 0"},
      {"lr_scaling", "sqrt",
       "--lr_scaling: \"sqrt\" is neither none nor linear"},
      {"lr_reference_batch", "-4", "--lr_reference_batch must be >= 0"},
  };
  for (const Case& c : cases) {
    gflags::FlagSaver restore;
    gflags::SetCommandLineOption(c.flag, c.value);
    absl::StatusOr<JobConfig> job = JobConfigFromFlags();
    ASSERT_FALSE(job.ok()) << c.flag << "=" << c.value;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(job.status().message(), HasSubstr(c.says));
  }
}

TEST_F(LearningRateFlagsTest, AJobFilesBadScheduleIsNamed) {
  absl::StatusOr<JobConfig> flags = JobConfigFromFlags();
  ASSERT_TRUE(flags.ok()) << flags.status();
  JobConfig job = *flags;
  job.mutable_embedding_optimizer()->set_learning_rate(0.1f);
  job.mutable_embedding_optimizer()->mutable_adagrad();
  job.mutable_embedding_optimizer()->mutable_schedule()->set_decay(
      LearningRateSchedule::DECAY_EXPONENTIAL);
  job.mutable_embedding_optimizer()->mutable_schedule()->set_decay_steps(10);
  absl::Status s = ValidateJobConfig(job);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("embedding_optimizer"));
  EXPECT_THAT(s.message(), HasSubstr("schedule.decay_rate must be"));
}

TEST(LearningRateScalingTest, SyncScalesEveryRateByTheWorkers) {
  JobConfig job = Job(256);  // global: 64 per worker of 4
  job.set_lr_scaling("linear");
  job.mutable_embedding_optimizer()->set_learning_rate(0.1f);
  job.mutable_embedding_optimizer()->mutable_adagrad();
  absl::StatusOr<std::string> note =
      ApplyLearningRateScaling(Mode("sync"), 4, &job);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_THAT(*note, HasSubstr("global batch 256 / reference batch 64"));
  EXPECT_FLOAT_EQ(job.optimizer().learning_rate(), 0.04f);
  EXPECT_FLOAT_EQ(job.embedding_optimizer().learning_rate(), 0.4f);
}

TEST(LearningRateScalingTest, TheReferenceBatchAndBackupWorkersCount) {
  JobConfig job = Job(256);
  job.set_lr_scaling("linear");
  job.set_lr_reference_batch(32);
  job.set_backup_workers(1);
  // An update averages 3 of the 4 workers' 64 examples: 192 / 32 = 6.
  ASSERT_TRUE(ApplyLearningRateScaling(Mode("sync"), 4, &job).ok());
  EXPECT_FLOAT_EQ(job.optimizer().learning_rate(), 0.06f);
}

TEST(LearningRateScalingTest, HybridScalesTheDenseRateNotTheTables) {
  JobConfig job = Job(128);
  job.set_lr_scaling("linear");
  ASSERT_TRUE(ApplyLearningRateScaling(Mode("hybrid"), 2, &job).ok());
  EXPECT_FLOAT_EQ(job.optimizer().learning_rate(), 0.02f);
  // The tables trained with the dense optimizer: they keep an unscaled
  // copy of it.
  ASSERT_TRUE(job.has_embedding_optimizer());
  EXPECT_FLOAT_EQ(job.embedding_optimizer().learning_rate(), 0.01f);
  EXPECT_TRUE(job.embedding_optimizer().has_adam());

  JobConfig sync_rows = Job(128);
  sync_rows.set_lr_scaling("linear");
  ASSERT_TRUE(
      ApplyLearningRateScaling(Mode("hybrid:sync"), 2, &sync_rows).ok());
  EXPECT_FLOAT_EQ(sync_rows.optimizer().learning_rate(), 0.02f);
  EXPECT_FALSE(sync_rows.has_embedding_optimizer());
}

TEST(LearningRateScalingTest, AsyncIsRefusedAndNoneChangesNothing) {
  JobConfig job = Job(64);
  job.set_lr_scaling("linear");
  absl::StatusOr<std::string> note =
      ApplyLearningRateScaling(Mode("async"), 4, &job);
  EXPECT_EQ(note.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(note.status().message(),
              HasSubstr("in mode async every update is one worker's batch"));
  job.set_lr_scaling("none");
  note = ApplyLearningRateScaling(Mode("sync"), 4, &job);
  ASSERT_TRUE(note.ok());
  EXPECT_EQ(*note, "");
  EXPECT_FLOAT_EQ(job.optimizer().learning_rate(), 0.01f);
}

TEST(JobLearningRatesTest, LockstepCountsGlobalStepsAsyncWorkerSteps) {
  JobConfig job = Job(64);
  LearningRateSchedule* s = job.mutable_optimizer()->mutable_schedule();
  s->set_decay(LearningRateSchedule::DECAY_CONSTANT);
  s->set_warmup_steps(10);  // 0.001 more per update
  job.mutable_embedding_optimizer()->set_learning_rate(0.5f);
  job.mutable_embedding_optimizer()->mutable_adagrad();
  absl::StatusOr<JobLearningRates> sync =
      JobLearningRates::Create(job, Mode("sync"));
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_TRUE(sync->scheduled());
  // 8 worker steps, 4 global: the latest update was t = 4, Keras step 3.
  JobLearningRates::Rates r = sync->At(8, 4);
  EXPECT_FLOAT_EQ(r.dense, 0.003f);
  ASSERT_TRUE(r.embedding.has_value());
  EXPECT_FLOAT_EQ(*r.embedding, 0.5f);
  absl::StatusOr<JobLearningRates> async =
      JobLearningRates::Create(job, Mode("async"));
  ASSERT_TRUE(async.ok());
  EXPECT_FLOAT_EQ(async->At(8, 0).dense, 0.007f);
  // Before any step: the first update's rate.
  EXPECT_FLOAT_EQ(async->At(0, 0).dense, 0.0f);
}

TEST(JobLearningRatesTest, StatusAndMetricsShowTheRate) {
  JobStatus status;
  status.set_steps_done(3);
  status.set_learning_rate(0.00125f);
  EXPECT_THAT(FormatJobStatus(status), HasSubstr("; learning rate 0.00125\n"));
  status.set_embedding_learning_rate(0.05f);
  EXPECT_THAT(FormatJobStatus(status),
              HasSubstr("; learning rate 0.00125 (tables 0.05)\n"));

  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/learning_rates_test_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::FILE* null = std::fopen("/dev/null", "w");
    MetricsWriter writer(dir, "sync", null);
    ASSERT_TRUE(writer.Open().ok());
    StepResponse step;
    step.set_examples(4);
    writer.RecordStep(0, 1, step, static_cast<float>(0.0004));
    EpochResult epoch;
    epoch.epoch = 1;
    epoch.learning_rate = static_cast<float>(0.0004);
    writer.WriteEpoch(epoch, -1);
    std::fclose(null);
  }
  std::ifstream metrics(dir + "/metrics.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(metrics, line));
  EXPECT_EQ(nlohmann::json::parse(line)["learning_rate"].dump(), "0.0004");
  EXPECT_FALSE(nlohmann::json::parse(line).contains("embedding_learning_rate"));
  std::ifstream steps(dir + "/steps.jsonl");
  ASSERT_TRUE(std::getline(steps, line));
  EXPECT_EQ(nlohmann::json::parse(line)["learning_rate"].dump(), "0.0004");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
