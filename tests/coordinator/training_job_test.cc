// The whole coordinator job in one process: real parameter servers on
// loopback (created variables, checkpoints), workers replaced by fakes
// that record every example they are given, output into memory.

#include "coordinator/training_job.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/byte_codec.h"
#include "common/example_digest.h"
#include "coordinator/variable_plan.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/common/checkpoint/checkpoint_test_util.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing_util::ScratchDir;

constexpr int64_t kTrain = 40;
constexpr int64_t kTest = 12;

// What the fake workers saw, shared by all of them.
struct Seen {
  absl::Mutex mu;
  std::map<int64_t, int> trained ABSL_GUARDED_BY(mu);  // example -> times
  int64_t steps ABSL_GUARDED_BY(mu) = 0;
};

// Configure calls in flight at once, across the fake workers: a call with
// a dataset shard waits (bounded) until `target` calls have been in flight
// together.
class ConfigureGate {
 public:
  explicit ConfigureGate(int target) : target_(target) {}
  void Pass() {
    absl::MutexLock lock(&mu_);
    ++now_;
    peak_ = std::max(peak_, now_);
    auto reached = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return peak_ >= target_;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(20))) {
      ++timed_out_;
    }
    --now_;
  }
  int peak() const {
    absl::MutexLock lock(&mu_);
    return peak_;
  }
  int timed_out() const {
    absl::MutexLock lock(&mu_);
    return timed_out_;
  }

 private:
  const int target_;
  mutable absl::Mutex mu_;
  int now_ ABSL_GUARDED_BY(mu_) = 0;
  int peak_ ABSL_GUARDED_BY(mu_) = 0;
  int timed_out_ ABSL_GUARDED_BY(mu_) = 0;
};

// A worker that trains nothing: every step "trains" its examples (counted
// in Seen) with a loss that falls as steps go on; evaluation reports a
// fixed accuracy. `on_step` runs inside step `trigger_step`.
class FakeTask : public WorkerTask {
 public:
  FakeTask(int index, Seen* seen) : seen_(seen) {
    // host:port, as a joining worker's cluster needs.
    address_ = absl::StrCat("fake-worker-", index, ":1");
  }

  const std::string& address() const override { return address_; }
  absl::Status Configure(const WorkerConfig& config,
                         ConfigureResponse* response) override {
    if (gate_ != nullptr && config.train_end() > config.train_begin()) {
      gate_->Pass();
    }
    if (configure_failures_ > 0) {
      --configure_failures_;
      return configure_error_;
    }
    response->set_train_total(kTrain);
    response->set_test_examples(kTest);
    response->set_train_examples(config.train_end() - config.train_begin());
    response->set_device("fake");
    return absl::OkStatus();
  }
  absl::Status Evaluate(const EvaluateRequest& request,
                        EvaluateResponse* response) override {
    if (fail_evaluate_) {
      fail_evaluate_ = false;
      down_ = true;
      return absl::UnavailableError("worker went away");
    }
    if (died_evaluating_) {
      // Killed, restarted and restored before the evaluator probes it.
      died_evaluating_ = false;
      return absl::UnavailableError("Socket closed");
    }
    if (unconfigured_evaluate_) {
      // Restarted, and restored by the step recovery just after this call
      // arrived: it answers as a real worker does, and is ready again.
      unconfigured_evaluate_ = false;
      return absl::FailedPreconditionError("worker is not configured yet");
    }
    const int64_t n = request.end() - request.begin();
    response->set_examples(n);
    response->set_correct(n / 2);
    response->set_loss_sum(0.25 * n);
    return absl::OkStatus();
  }
  absl::Status Health(HealthResponse* response, double) override {
    if (down_) return absl::UnavailableError("down");
    response->set_configured(true);
    return absl::OkStatus();
  }
  absl::Status Shutdown(const std::string&) override {
    return absl::OkStatus();
  }
  absl::Status RunStep(const StepRequest& request,
                       StepResponse* response) override {
    std::vector<int64_t> ids(request.example_ids().size() / sizeof(int64_t));
    std::memcpy(ids.data(), request.example_ids().data(),
                ids.size() * sizeof(int64_t));
    {
      absl::MutexLock lock(&seen_->mu);
      for (int64_t id : ids) ++seen_->trained[id];
      ++seen_->steps;
    }
    if (request.step() == trigger_step_ && on_step_) on_step_();
    response->set_examples(static_cast<int64_t>(ids.size()));
    response->set_example_digest(DigestOfStep(request));
    response->set_correct(static_cast<int64_t>(ids.size()));
    response->set_loss(1.0f / (1 + request.step()));
    return absl::OkStatus();
  }
  WorkerHealth Probe() override {
    return down_ ? WorkerHealth::kDown : WorkerHealth::kReady;
  }
  absl::Status Restore() override { return absl::OkStatus(); }

  void OnStep(int64_t step, std::function<void()> action) {
    trigger_step_ = step;
    on_step_ = std::move(action);
  }
  void FailNextEvaluate() { fail_evaluate_ = true; }
  void AnswerNextEvaluateUnconfigured() { unconfigured_evaluate_ = true; }
  void DieWhileEvaluatingAndComeBack() { died_evaluating_ = true; }
  // The next `times` Configure calls fail with `error`.
  void FailConfigure(int times, absl::Status error) {
    configure_failures_ = times;
    configure_error_ = std::move(error);
  }
  // Configure calls with a dataset shard pass `gate` first.
  void GateConfigure(ConfigureGate* gate) { gate_ = gate; }

 private:
  std::string address_;
  Seen* const seen_;
  std::atomic<bool> down_{false};
  std::atomic<bool> fail_evaluate_{false};
  std::atomic<bool> unconfigured_evaluate_{false};
  std::atomic<bool> died_evaluating_{false};
  int configure_failures_ = 0;
  absl::Status configure_error_;
  ConfigureGate* gate_ = nullptr;
  int64_t trigger_step_ = -1;
  std::function<void()> on_step_;
};

class TrainingJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ps_.started());
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        R"pb(
          model { kind: "mlp" input_dim: 4 hidden_units: 3 num_classes: 2 }
          optimizer {
            learning_rate: 0.1
            sgd {}
          }
          mode: "async"
          schedule { epochs: 2 batch_size: 4 seed: 7 }
        )pb",
        &job_));
    options_.run_dir = run_dir_.path();
    options_.cluster_wait = absl::Seconds(10);
    options_.heartbeat_interval = absl::ZeroDuration();
    options_.shutdown_cluster = false;
    out_ = open_memstream(&out_buffer_, &out_size_);
    options_.out = out_;
  }
  void TearDown() override {
    job_ptr_.reset();
    std::fclose(out_);
    std::free(out_buffer_);
  }

  // A job over one parameter server and `workers` fake workers.
  TrainingJob* MakeJob(int workers) {
    JobCluster cluster;
    cluster.ps.push_back(ps_.NewClient());
    for (int w = 0; w < workers; ++w) {
      auto task = std::make_unique<FakeTask>(w, &seen_);
      tasks_.push_back(task.get());
      cluster.workers.push_back(std::move(task));
    }
    absl::StatusOr<VariablePlan> plan = PlanVariables(job_, 1);
    EXPECT_TRUE(plan.ok()) << plan.status();
    job_ptr_ = std::make_unique<TrainingJob>(std::move(cluster), job_,
                                             *std::move(plan), options_);
    return job_ptr_.get();
  }

  std::string Output() {
    std::fflush(out_);
    return std::string(out_buffer_, out_size_);
  }
  std::vector<std::string> MetricsLines() {
    std::ifstream in(run_dir_.path() + "/metrics.jsonl");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  ps_test::TestPsServer ps_;
  ScratchDir run_dir_;
  ScratchDir checkpoints_;
  JobConfig job_;
  TrainingJobOptions options_;
  Seen seen_;
  std::vector<FakeTask*> tasks_;  // owned by the job
  std::unique_ptr<TrainingJob> job_ptr_;
  std::FILE* out_ = nullptr;
  char* out_buffer_ = nullptr;
  size_t out_size_ = 0;
};

TEST_F(TrainingJobTest, EveryExampleIsTrainedOncePerEpoch) {
  TrainingJob* job = MakeJob(2);
  ASSERT_TRUE(job->Run().ok()) << Output();
  absl::MutexLock lock(&seen_.mu);
  ASSERT_EQ(seen_.trained.size(), static_cast<size_t>(kTrain));
  for (const auto& [example, times] : seen_.trained) {
    EXPECT_EQ(times, 2) << "example " << example;
  }
  EXPECT_EQ(seen_.steps, 2 * kTrain / 4);
  ASSERT_EQ(job->results().size(), 2u);
  EXPECT_DOUBLE_EQ(job->results()[1].test_accuracy, 0.5);
  EXPECT_EQ(MetricsLines().size(), 2u);
  EXPECT_THAT(Output(), HasSubstr("final test accuracy 0.5000 after 2 "
                                  "epochs"));
}

TEST_F(TrainingJobTest, ASliceAWorkerFailedToEvaluateGoesToAnother) {
  TrainingJob* job = MakeJob(2);
  tasks_[1]->FailNextEvaluate();
  ASSERT_TRUE(job->Run().ok()) << Output();
  // The whole test set was evaluated: accuracy over all 12 examples.
  EXPECT_DOUBLE_EQ(job->results()[0].test_accuracy, 0.5);
  EXPECT_DOUBLE_EQ(job->results()[0].test_loss, 0.25);
}

// A restarted worker can receive its evaluation slice before the step
// recovery has restored it, and be ready by the time the evaluator looks:
// its "not configured" answer is lost state, not a result, so the slice is
// evaluated again (it once ended the job).
TEST_F(TrainingJobTest, ASliceAnsweredUnconfiguredByARestoredWorkerIsRetried) {
  TrainingJob* job = MakeJob(2);
  tasks_[1]->AnswerNextEvaluateUnconfigured();
  ASSERT_TRUE(job->Run().ok()) << Output();
  EXPECT_DOUBLE_EQ(job->results()[0].test_accuracy, 0.5);
  EXPECT_DOUBLE_EQ(job->results()[0].test_loss, 0.25);
}

// A worker killed while it evaluates is restarted and restored within
// moments: its "Socket closed" is no result, even though it is ready when
// the evaluator probes it (it once ended the job).
TEST_F(TrainingJobTest, ASliceLostToAWorkerThatIsBackAlreadyIsEvaluatedAgain) {
  TrainingJob* job = MakeJob(2);
  tasks_[1]->DieWhileEvaluatingAndComeBack();
  ASSERT_TRUE(job->Run().ok()) << Output();
  EXPECT_DOUBLE_EQ(job->results()[0].test_accuracy, 0.5);
  EXPECT_DOUBLE_EQ(job->results()[0].test_loss, 0.25);
}

// Issue #31: a worker that dies while the chief configures it (a restarted
// chief, a busy cluster) is waited for with the backoff, not the end of
// the job; worker 0 also answers the data sizes, so it is tried too.
TEST_F(TrainingJobTest, AWorkerThatDiesWhileItIsConfiguredIsWaitedFor) {
  TrainingJob* job = MakeJob(2);
  tasks_[0]->FailConfigure(1, absl::UnavailableError("Socket closed"));
  tasks_[1]->FailConfigure(2, absl::UnavailableError("Socket closed"));
  ASSERT_TRUE(job->Run().ok()) << Output();
  EXPECT_THAT(Output(), HasSubstr("worker 0 could not be configured"));
  EXPECT_THAT(Output(), HasSubstr("worker 1 could not be configured"));
  EXPECT_EQ(job->results().size(), 2u);
}

// ... but a worker's own answer (a bad model, data it cannot read) ends the
// job at once, as before.
TEST_F(TrainingJobTest, AWorkerRefusingItsConfigurationEndsTheJob) {
  TrainingJob* job = MakeJob(2);
  tasks_[1]->FailConfigure(1, absl::InvalidArgumentError("bad model"));
  absl::Status s = job->Run();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(Output(), ::testing::Not(HasSubstr("could not be configured")));
}

// Issue #35: the workers are configured at once, at most
// startup_concurrency at a time (each reads its data as it is configured).
TEST_F(TrainingJobTest, WorkersAreConfiguredAtOnceUpToTheBound) {
  options_.startup_concurrency = 4;
  TrainingJob* job = MakeJob(8);
  ConfigureGate gate(4);
  for (FakeTask* task : tasks_) task->GateConfigure(&gate);
  ASSERT_TRUE(job->Run().ok()) << Output();
  // One at a time, the first would have waited for three more in vain.
  EXPECT_EQ(gate.timed_out(), 0);
  EXPECT_EQ(gate.peak(), 4);
  EXPECT_EQ(job->results().size(), 2u);
}

// ... and of several workers refusing their configuration, the job ends
// with the lowest one's answer, as when they were configured in turn.
TEST_F(TrainingJobTest, TheFirstWorkerToRefuseItsConfigurationIsNamed) {
  options_.startup_concurrency = 8;
  TrainingJob* job = MakeJob(8);
  tasks_[6]->FailConfigure(1, absl::InvalidArgumentError("worker 6: bad"));
  tasks_[3]->FailConfigure(1, absl::InvalidArgumentError("worker 3: bad"));
  absl::Status s = job->Run();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(s.message(), "worker 3: bad");
}

TEST_F(TrainingJobTest, ExtraStepsAreEvaluatedAndKept) {
  TrainingJob* job = MakeJob(2);
  job->control()->AddSteps(3);
  ASSERT_TRUE(job->Run().ok()) << Output();
  ASSERT_EQ(job->results().size(), 3u);
  EXPECT_EQ(job->results()[2].extra_steps, "steps 1-3");
  EXPECT_EQ(job->results()[2].steps, 3);
  const std::vector<std::string> lines = MetricsLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[2], HasSubstr("\"extra_steps\":\"steps 1-3\""));
  EXPECT_THAT(Output(), HasSubstr("after 2 epochs and extra steps 1-3"));
}

TEST_F(TrainingJobTest, CheckpointDuringExtraStepsIsTakenAtAStepBoundary) {
  options_.checkpoint_dir = checkpoints_.path();
  TrainingJob* job = MakeJob(1);
  // Epochs take steps 0-19; extra steps are 20 on. During step 22 an
  // operator asks for a checkpoint, which must not wait for all 30.
  job->control()->AddSteps(30);
  absl::StatusOr<std::string> asked;
  absl::Notification answered;
  std::thread operator_thread;
  tasks_[0]->OnStep(22, [&] {
    operator_thread = std::thread([&] {
      asked = job->control()->Checkpoint(absl::Seconds(30));
      answered.Notify();
    });
    // The step finishes only once the request is in.
    while (!job->control()->checkpoint_wanted() &&
           !answered.HasBeenNotified()) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  ASSERT_TRUE(job->Run().ok()) << Output();
  operator_thread.join();
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_THAT(Output(), HasSubstr("checkpoint after step"));
  // Taken between steps 23 and 50, not after the last one.
  {
    absl::MutexLock lock(&seen_.mu);
    EXPECT_EQ(seen_.steps, 20 + 30);
  }
  ASSERT_EQ(job->results().size(), 3u);
  EXPECT_EQ(job->results()[2].extra_steps, "steps 1-30");
  const int64_t step = std::stoll(asked->substr(asked->rfind('-') + 1));
  EXPECT_GT(step, 22);
  EXPECT_LT(step, 50);
}

// Issue #44: checkpoints inside the epochs. With a cadence in seconds so
// short that every step boundary is due, one is written at every step of
// both epochs (10 steps each), each holding the epoch's position; the
// epochs still train every example once.
TEST_F(TrainingJobTest, CheckpointsOnACadenceAreTakenInsideTheEpochs) {
  options_.checkpoint_dir = checkpoints_.path();
  options_.checkpoint_every = absl::Nanoseconds(1);
  options_.keep_checkpoints = 100;
  TrainingJob* job = MakeJob(1);
  ASSERT_TRUE(job->Run().ok()) << Output();
  std::vector<std::string> names;
  for (const auto& e :
       std::filesystem::directory_iterator(checkpoints_.path())) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> want;
  for (int step = 0; step <= 20; ++step) {
    want.push_back(absl::StrFormat("ckpt-%010d", step));
  }
  EXPECT_EQ(names, want);
  ASSERT_EQ(job->results().size(), 2u);
  for (const EpochResult& r : job->results()) EXPECT_EQ(r.examples, 40);
}

// With a cadence in steps, every 4 steps from the last checkpoint on: at
// the epochs' own checkpoints (steps 0, 10, 20) the count starts again.
TEST_F(TrainingJobTest, CheckpointsEveryNStepsCountFromTheLastOne) {
  options_.checkpoint_dir = checkpoints_.path();
  options_.checkpoint_every_steps = 4;
  options_.keep_checkpoints = 100;
  ASSERT_TRUE(MakeJob(1)->Run().ok()) << Output();
  std::vector<std::string> names;
  for (const auto& e :
       std::filesystem::directory_iterator(checkpoints_.path())) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> want;
  for (int step : {0, 4, 8, 10, 14, 18, 20}) {
    want.push_back(absl::StrFormat("ckpt-%010d", step));
  }
  EXPECT_EQ(names, want);
}

// The cadence goes on through tessera_ctl's extra steps (steps 20-29),
// which may run far longer than an epoch.
TEST_F(TrainingJobTest, CheckpointsEveryNStepsGoOnDuringExtraSteps) {
  options_.checkpoint_dir = checkpoints_.path();
  options_.checkpoint_every_steps = 4;
  options_.keep_checkpoints = 100;
  TrainingJob* job = MakeJob(1);
  job->control()->AddSteps(10);
  ASSERT_TRUE(job->Run().ok()) << Output();
  std::vector<std::string> names;
  for (const auto& e :
       std::filesystem::directory_iterator(checkpoints_.path())) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> want;
  for (int step : {0, 4, 8, 10, 14, 18, 20, 24, 28}) {
    want.push_back(absl::StrFormat("ckpt-%010d", step));
  }
  EXPECT_EQ(names, want);
  ASSERT_EQ(job->results().size(), 3u);
  EXPECT_EQ(job->results()[2].extra_steps, "steps 1-10");
  EXPECT_EQ(job->results()[2].steps, 10);
}

TEST_F(TrainingJobTest, StopDuringExtraStepsCheckpointsAndReportsThem) {
  options_.checkpoint_dir = checkpoints_.path();
  TrainingJob* job = MakeJob(1);
  job->control()->AddSteps(1000);
  tasks_[0]->OnStep(25, [&] { job->Stop("enough"); });
  ASSERT_TRUE(job->Run().ok()) << Output();
  const std::string out = Output();
  EXPECT_THAT(out, HasSubstr("checkpoint after step"));
  EXPECT_THAT(out, HasSubstr("stopped by the operator (enough)"));
  ASSERT_EQ(job->results().size(), 3u);
  const EpochResult& extra = job->results()[2];
  EXPECT_GE(extra.steps, 6);
  EXPECT_LT(extra.steps, 1000);
  EXPECT_EQ(extra.extra_steps, absl::StrCat("steps 1-", extra.steps));
  EXPECT_EQ(MetricsLines().size(), 3u);
}

// Issue #42: a stop without a reason is no "stopped by the operator ()".
TEST_F(TrainingJobTest, AStopWithoutAReasonPrintsNoEmptyParentheses) {
  options_.checkpoint_dir = checkpoints_.path();
  TrainingJob* job = MakeJob(1);
  tasks_[0]->OnStep(1, [&] { job->Stop(""); });
  ASSERT_TRUE(job->Run().ok()) << Output();
  // Inside epoch 1 ("... at step N of 10 of epoch 1") or at its end.
  EXPECT_THAT(Output(), HasSubstr("stopped by the operator "));
  EXPECT_THAT(Output(), ::testing::Not(HasSubstr("()")));
}

// Issue #42: a regression (mean squared error) has no accuracy: every
// epoch's line, the table and the final line show its loss, the MSE.
TEST_F(TrainingJobTest, ARegressionReportsItsMseAndNoAccuracy) {
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        inputs {
          name: "x"
          dense { shape: 4 }
        }
        label { kind: REAL }
        layers {
          name: "out"
          inputs: "x"
          dense { units: 1 }
        }
        loss { kind: MEAN_SQUARED_ERROR input: "out" }
      )pb",
      job_.mutable_model_def()));
  job_.clear_model();
  TrainingJob* job = MakeJob(2);
  ASSERT_TRUE(job->Run().ok()) << Output();
  const std::string out = Output();
  EXPECT_THAT(out, HasSubstr("epoch 2/2: train loss (MSE) "));
  EXPECT_THAT(out, HasSubstr("test loss (MSE) 0.2500"));
  EXPECT_THAT(out, HasSubstr("train_mse"));
  EXPECT_THAT(out, HasSubstr("final test loss (MSE) 0.2500 after 2 epochs"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("accuracy")));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("_acc")));
  EXPECT_TRUE(job->status().regression());
  EXPECT_FLOAT_EQ(job->status().last_test_loss(), 0.25f);
}

// Issue #42: --evaluate_only prints the checkpoint's evaluation, with no
// empty epoch table and no "no epoch left to train".
TEST_F(TrainingJobTest, EvaluateOnlyPrintsTheEvaluationAndNoEmptyTable) {
  options_.checkpoint_dir = checkpoints_.path();
  ASSERT_TRUE(MakeJob(1)->Run().ok()) << Output();
  const size_t trained = Output().size();
  options_.evaluate_only = true;
  ASSERT_TRUE(MakeJob(1)->Run().ok()) << Output();
  const std::string out = Output().substr(trained);
  EXPECT_THAT(out, HasSubstr("test loss 0.2500, test accuracy 0.5000"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("no epoch left")));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("train_loss")));
}

// tessera_ctl status once showed "4294 steps done, 4289 scheduled": while
// extra steps keep the queue short, the scheduled count stood still.
TEST_F(TrainingJobTest, StatusNeverShowsMoreStepsDoneThanScheduled) {
  TrainingJob* job = MakeJob(1);
  job->control()->AddSteps(30);  // steps 20-49, after 2 epochs of 10
  JobStatus during;
  tasks_[0]->OnStep(40, [&] { during = job->status(); });
  ASSERT_TRUE(job->Run().ok()) << Output();
  EXPECT_GE(during.steps_done(), 20);
  EXPECT_LE(during.steps_done(), during.steps_scheduled());
  EXPECT_GE(during.steps_scheduled(), 40);  // steps 0-39 were handed out
  const JobStatus after = job->status();
  EXPECT_EQ(after.steps_done(), 50);
  EXPECT_EQ(after.steps_scheduled(), 50);
}

TEST_F(TrainingJobTest, StatusAnswersFromTheLastHealthCheck) {
  TrainingJob* job = MakeJob(2);
  ASSERT_TRUE(job->Run().ok()) << Output();
  const JobStatus status = job->status();
  ASSERT_EQ(status.servers_size(), 1);
  EXPECT_TRUE(status.servers(0).up());
  EXPECT_GT(status.servers(0).num_shards(), 0);
  ASSERT_EQ(status.workers_size(), 2);
  EXPECT_EQ(status.workers(0).steps_done() + status.workers(1).steps_done(),
            2 * kTrain / 4);
  EXPECT_EQ(status.state(), "done");
}

// Elastic (ElasticJoins): a worker that joins while the
// epochs run is configured with the shard it serves, gets its index and
// the job's cluster, and every example is still trained once per epoch.
TEST_F(TrainingJobTest, AWorkerJoinsMidEpochAndEveryExampleIsTrainedOnce) {
  std::vector<FakeTask*> joined;
  options_.connect_worker = [&](const std::string&, int index) {
    auto task = std::make_unique<FakeTask>(index, &seen_);
    joined.push_back(task.get());
    return std::unique_ptr<WorkerTask>(std::move(task));
  };
  options_.cluster_jobs = {{"chief", {"chief:1"}}, {"ps", {"ps:1"}}};
  TrainingJob* job = MakeJob(2);
  absl::StatusOr<AddWorkerResponse> added;
  // Whichever worker runs step 3 (a step of the first epoch) asks.
  for (FakeTask* task : tasks_) {
    task->OnStep(3, [&] { added = job->AddWorker("fake-worker-2:1"); });
  }
  ASSERT_TRUE(job->Run().ok()) << Output();
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->worker_index(), 2);
  EXPECT_THAT(added->tf_config(), HasSubstr("fake-worker-2:1"));
  EXPECT_THAT(added->tf_config(), HasSubstr("\"index\":2"));
  {
    absl::MutexLock lock(&seen_.mu);
    ASSERT_EQ(seen_.trained.size(), static_cast<size_t>(kTrain));
    for (const auto& [example, times] : seen_.trained) {
      EXPECT_EQ(times, 2) << "example " << example;
    }
  }
  const JobStatus status = job->status();
  ASSERT_EQ(status.workers_size(), 3);
  EXPECT_EQ(status.workers(2).state(), "active");
  // Started twice, asked to join, joined.
  ASSERT_EQ(status.membership_size(), 4);
  EXPECT_EQ(status.membership(3).state(), "active");
  EXPECT_THAT(Output(), HasSubstr("worker 2 (fake-worker-2:1) joined"));
  // A second join at the same address is refused, naming it.
  absl::StatusOr<AddWorkerResponse> again = job->AddWorker("fake-worker-2:1");
  EXPECT_FALSE(again.ok());
}

TEST_F(TrainingJobTest, AJoinOrADrainOutsideTrainingIsRefused) {
  options_.connect_worker = [&](const std::string&, int index) {
    return std::unique_ptr<WorkerTask>(
        std::make_unique<FakeTask>(index, &seen_));
  };
  TrainingJob* job = MakeJob(2);
  EXPECT_EQ(job->AddWorker("fake-worker-2:1").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(job->DrainWorker("1").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(TrainingJobTest, AMirroredJobRefusesJoinsAndDrainsNamingTheMode) {
  job_.set_mode("mirrored");
  TrainingJob* job = MakeJob(2);
  const absl::Status join = job->AddWorker("fake-worker-2:1").status();
  EXPECT_EQ(join.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(join.message(), HasSubstr("mode mirrored"));
  const absl::Status drain = job->DrainWorker("0").status();
  EXPECT_EQ(drain.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(drain.message(), HasSubstr("mode mirrored"));
}

}  // namespace
}  // namespace tessera
