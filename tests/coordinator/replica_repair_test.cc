// ReplicaRepair on stand-in workers: which replica is copied where, and
// each reason it refuses (the job then goes back to its checkpoint).

#include "coordinator/replica_repair.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/cluster_coordinator.h"
#include "coordinator/cluster_health.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/worker_replicas.h"
#include "coordinator/worker_task.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/written_text.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Holds every worker of a round until all have started it, as their
// all-reduce does: no part fails before every part was taken.
class RoundBarrier {
 public:
  explicit RoundBarrier(int n) : n_(n) {}
  void ArriveAndWait() {
    absl::MutexLock lock(&mu_);
    ++arrived_;
    auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return arrived_ >= n_;
    };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(20)));
  }

 private:
  const int n_;
  absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
};

// A replica-keeping worker. Its step `fail_step` fails once every worker
// started it: with `die`, the process is gone (Probe says down once, then
// lost state until Restore).
class ReplicaTask : public WorkerTask {
 public:
  ReplicaTask(int index, RoundBarrier* barrier)
      : address_(absl::StrCat("replica-worker-", index, ":1")),
        barrier_(barrier) {}

  const std::string& address() const override { return address_; }
  absl::Status Configure(const WorkerConfig&, ConfigureResponse*) override {
    return absl::OkStatus();
  }
  absl::Status Evaluate(const EvaluateRequest&, EvaluateResponse*) override {
    return absl::OkStatus();
  }
  absl::Status Health(HealthResponse* response, double) override {
    response->set_configured(true);
    return absl::OkStatus();
  }
  absl::Status Shutdown(const std::string&) override {
    return absl::OkStatus();
  }
  absl::Status RunStep(const StepRequest& request, StepResponse*) override {
    barrier_->ArriveAndWait();
    absl::MutexLock lock(&mu_);
    if (request.step() != fail_step_) return absl::OkStatus();
    if (die_) state_ = kGone;
    return die_ ? absl::UnavailableError("Socket closed")
                : absl::AbortedError("the chief interrupted the all-reduce");
  }
  WorkerHealth Probe() override {
    absl::MutexLock lock(&mu_);
    if (state_ == kGone) {
      state_ = kRestarted;
      return WorkerHealth::kDown;
    }
    return state_ == kRestarted ? WorkerHealth::kLostState
                                : WorkerHealth::kReady;
  }
  absl::Status Restore() override {
    absl::MutexLock lock(&mu_);
    state_ = kUp;
    return absl::OkStatus();
  }
  absl::Status SaveReplica(const SaveShardsRequest& request,
                           SaveShardsResponse* response) override {
    absl::MutexLock lock(&mu_);
    saved_into_.push_back(request.directory());
    if (!save_error_.ok()) return save_error_;
    std::FILE* f =
        std::fopen((request.directory() + "/replica.shards").c_str(), "w");
    if (f != nullptr) std::fclose(f);
    response->mutable_file()->set_name("replica.shards");
    response->add_variables()->set_name("dense/kernel");
    return absl::OkStatus();
  }
  absl::Status RestoreReplica(const RestoreReplicaRequest& request,
                              RestoreShardsResponse*) override {
    absl::MutexLock lock(&mu_);
    restores_.push_back(request);
    // The copy is there while the workers read it.
    EXPECT_TRUE(std::filesystem::exists(request.checkpoint().directory() +
                                        "/replica.shards"));
    return absl::OkStatus();
  }

  void FailStep(int64_t step, bool die) {
    absl::MutexLock lock(&mu_);
    fail_step_ = step;
    die_ = die;
  }
  void FailSave(absl::Status error) {
    absl::MutexLock lock(&mu_);
    save_error_ = std::move(error);
  }
  std::vector<std::string> saved_into() const {
    absl::MutexLock lock(&mu_);
    return saved_into_;
  }
  std::vector<RestoreReplicaRequest> restores() const {
    absl::MutexLock lock(&mu_);
    return restores_;
  }

 private:
  enum State { kUp, kGone, kRestarted };
  const std::string address_;
  RoundBarrier* const barrier_;
  mutable absl::Mutex mu_;
  int64_t fail_step_ ABSL_GUARDED_BY(mu_) = -1;
  bool die_ ABSL_GUARDED_BY(mu_) = false;
  State state_ ABSL_GUARDED_BY(mu_) = kUp;
  absl::Status save_error_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> saved_into_ ABSL_GUARDED_BY(mu_);
  std::vector<RestoreReplicaRequest> restores_ ABSL_GUARDED_BY(mu_);
};

class ReplicaRepairTest : public ::testing::Test {
 protected:
  void Start(int n, const std::string& mode = "") {
    std::vector<std::unique_ptr<WorkerStub>> owned;
    std::vector<WorkerTask*> tasks;
    barrier_ = std::make_unique<RoundBarrier>(n);
    for (int w = 0; w < n; ++w) {
      workers_.push_back(new ReplicaTask(w, barrier_.get()));
      tasks.push_back(workers_.back());
      owned.emplace_back(workers_.back());
    }
    CoordinatorOptions options;
    options.replicas_in_lockstep = true;
    options.worker_recovery_timeout = absl::Seconds(5);
    options.steal_threshold = std::numeric_limits<int>::max();
    coordinator_ =
        std::make_unique<ClusterCoordinator>(std::move(owned), options);
    out_ = std::tmpfile();
    health_ = std::make_unique<ClusterHealth>(std::vector<PsClient*>{}, tasks,
                                              out_, 4);
    replicas_ = std::make_unique<WorkerReplicas>(tasks, 4, absl::Seconds(5));
    directory_ =
        (std::filesystem::path(::testing::TempDir()) /
         absl::StrCat(
             "replica_repair_", getpid(), "_",
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
            .string();
    JobConfig job;
    job.mutable_optimizer()->set_learning_rate(0.5);
    job.set_mode(mode);
    repair_ =
        std::make_unique<ReplicaRepair>(coordinator_.get(), health_.get(),
                                        replicas_.get(), directory_, job, out_);
  }
  void TearDown() override {
    if (out_ != nullptr) std::fclose(out_);
  }

  // Runs step `step` of a round on every worker, as StepRunner schedules
  // it (worker w serves queue w), and returns the round's error.
  absl::Status RunRound(int64_t step) {
    for (int w = 0; w < static_cast<int>(workers_.size()); ++w) {
      StepRequest request;
      request.set_step(step);
      absl::StatusOr<StepFuture> f = coordinator_->Schedule(request, w);
      if (!f.ok()) return f.status();
    }
    return coordinator_->Join();
  }

  std::string Out() { return WrittenText(out_); }

  std::unique_ptr<RoundBarrier> barrier_;  // one round: RunRound once
  std::vector<ReplicaTask*> workers_;      // owned by coordinator_
  std::unique_ptr<ClusterCoordinator> coordinator_;
  std::FILE* out_ = nullptr;
  std::unique_ptr<ClusterHealth> health_;
  std::unique_ptr<WorkerReplicas> replicas_;
  std::string directory_;
  std::unique_ptr<ReplicaRepair> repair_;
};

TEST_F(ReplicaRepairTest, CopiesTheFirstSurvivorsReplicaOntoEveryWorker) {
  Start(3);
  workers_[0]->FailStep(7, /*die=*/true);
  workers_[1]->FailStep(7, /*die=*/false);
  workers_[2]->FailStep(7, /*die=*/false);
  absl::Status error = RunRound(7);
  ASSERT_FALSE(error.ok());
  EXPECT_THAT(coordinator_->replica_losses()->restarted(), ElementsAre(0));

  ASSERT_TRUE(repair_->Repair(3, error).ok());
  EXPECT_TRUE(workers_[0]->saved_into().empty());
  EXPECT_THAT(workers_[1]->saved_into(), ElementsAre(directory_));
  uint64_t epoch = 0;
  for (ReplicaTask* w : workers_) {
    ASSERT_EQ(w->restores().size(), 1u) << w->address();
    const RestoreReplicaRequest r = w->restores()[0];
    EXPECT_EQ(r.checkpoint().directory(), directory_);
    ASSERT_EQ(r.checkpoint().manifest().files_size(), 1);
    EXPECT_EQ(r.checkpoint().manifest().files(0).name(), "replica.shards");
    ASSERT_EQ(r.checkpoint().manifest().variables_size(), 1);
    EXPECT_EQ(r.checkpoint().manifest().variables(0).name(), "dense/kernel");
    EXPECT_FLOAT_EQ(r.checkpoint().manifest().optimizer().learning_rate(),
                    0.5f);
    // One new epoch for every ring.
    EXPECT_NE(r.collective_epoch(), 0u);
    if (epoch == 0) epoch = r.collective_epoch();
    EXPECT_EQ(r.collective_epoch(), epoch);
  }
  EXPECT_FALSE(std::filesystem::exists(directory_));
  EXPECT_THAT(Out(), HasSubstr("worker 0 restarted inside global step 3: "
                               "every replica copied from worker 1's"));
  // Dealt with: the checkpoint recovery does not see it again.
  EXPECT_FALSE(coordinator_->replica_losses()->Take());
}

TEST_F(ReplicaRepairTest, RefusesWhenNoWorkerRestarted) {
  Start(2);
  workers_[1]->FailStep(4, /*die=*/false);
  absl::Status error = RunRound(4);
  ASSERT_FALSE(error.ok());
  absl::Status s = repair_->Repair(2, error);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("no worker restarted"));
  EXPECT_TRUE(workers_[0]->saved_into().empty());
  EXPECT_TRUE(workers_[0]->restores().empty());
  // Left for the checkpoint recovery.
  EXPECT_TRUE(coordinator_->replica_losses()->Take());
}

// hybrid:ssp:2: the restarted worker's last 2 rounds' row pushes may
// never have reached the servers; the round alone cannot run again.
TEST_F(ReplicaRepairTest, RefusesWhenARestartedWorkerHadRowPushesInFlight) {
  Start(2, "hybrid:ssp:2");
  workers_[0]->FailStep(4, /*die=*/false);
  workers_[1]->FailStep(4, /*die=*/true);
  absl::Status error = RunRound(4);
  ASSERT_FALSE(error.ok());
  absl::Status s = repair_->Repair(2, error);
  // Marked as the settle's is, so that PsRecovery bounds the job's returns
  // to the checkpoint for either.
  EXPECT_TRUE(RowPushesLost(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker 1 restarted with up to 2 of its "
                                     "row pushes in flight"));
  EXPECT_TRUE(workers_[0]->saved_into().empty());
  EXPECT_TRUE(workers_[0]->restores().empty());
  // Left for the checkpoint recovery.
  EXPECT_TRUE(coordinator_->replica_losses()->Take());
}

TEST_F(ReplicaRepairTest, RefusesWhenNoReplicaSurvived) {
  Start(2);
  workers_[0]->FailStep(4, /*die=*/true);
  workers_[1]->FailStep(4, /*die=*/true);
  absl::Status error = RunRound(4);
  ASSERT_FALSE(error.ok());
  absl::Status s = repair_->Repair(2, error);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("no replica survived"));
  EXPECT_TRUE(coordinator_->replica_losses()->Take());
}

TEST_F(ReplicaRepairTest, AFailedCopyNamesTheWorkerAndLeavesTheLoss) {
  Start(2);
  workers_[0]->FailStep(4, /*die=*/false);
  workers_[1]->FailStep(4, /*die=*/true);
  workers_[0]->FailSave(absl::DataLossError("disk full"));
  absl::Status error = RunRound(4);
  ASSERT_FALSE(error.ok());
  absl::Status s = repair_->Repair(2, error);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker 0 (replica-worker-0:1) could not "
                                     "save its replica: disk full"));
  EXPECT_TRUE(workers_[1]->restores().empty());
  EXPECT_FALSE(std::filesystem::exists(directory_));
  EXPECT_TRUE(coordinator_->replica_losses()->Take());
}

}  // namespace
}  // namespace tessera
