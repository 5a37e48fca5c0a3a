// WorkerReplicas::Restore with a worker that restarts while the job goes
// back to its checkpoint (#48: the chaos soak's seeds 48014 and 48036 lost
// the job to "RestoreReplica: failed to connect" and to a restarted worker
// that answered unconfigured).
#include "coordinator/worker_replicas.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/worker_task.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// A worker whose first `down_calls` calls (RestoreReplica or Probe) find it
// down (it was killed), and which then answers unconfigured (it restarted)
// until configured again; after KeepStateWhileDown, down is stopped
// (SIGSTOP): it comes back as it was. `configured` false with no down
// calls: it came back before the restore.
class RestartingWorker final : public WorkerTask {
 public:
  RestartingWorker(int index, int down_calls, bool configured)
      : address_(absl::StrCat("127.0.0.1:", 7000 + index)),
        down_calls_(down_calls),
        configured_(configured) {}

  const std::string& address() const override { return address_; }
  absl::Status Configure(const WorkerConfig&, ConfigureResponse*) override {
    return absl::OkStatus();
  }
  absl::Status Evaluate(const EvaluateRequest&, EvaluateResponse*) override {
    absl::MutexLock lock(&mu_);
    if (Down()) return absl::UnavailableError("Evaluate: failed to connect");
    if (!configured_) {
      return absl::FailedPreconditionError("worker is not configured yet");
    }
    if (!answer_.ok()) return answer_;
    ++settles_;
    return absl::OkStatus();
  }
  absl::Status Health(HealthResponse*, double) override {
    return absl::OkStatus();
  }
  absl::Status Shutdown(const std::string&) override {
    return absl::OkStatus();
  }
  absl::Status RunStep(const StepRequest&, StepResponse*) override {
    return absl::OkStatus();
  }
  WorkerHealth Probe() override {
    absl::MutexLock lock(&mu_);
    if (Down()) return WorkerHealth::kDown;
    return configured_ ? WorkerHealth::kReady : WorkerHealth::kLostState;
  }
  absl::Status Restore() override {
    absl::MutexLock lock(&mu_);
    if (Down()) return absl::UnavailableError("failed to connect");
    ++configures_;
    configured_ = true;
    return absl::OkStatus();
  }
  absl::Status RestoreReplica(const RestoreReplicaRequest& request,
                              RestoreShardsResponse*) override {
    absl::MutexLock lock(&mu_);
    if (Down()) {
      return absl::UnavailableError(
          absl::StrCat(address_, " RestoreReplica: failed to connect"));
    }
    if (!configured_) {
      return absl::FailedPreconditionError(
          "RestoreReplica: this worker keeps no replica (not configured)");
    }
    if (!answer_.ok()) return answer_;
    restored_from_.push_back(request.checkpoint().directory());
    return absl::OkStatus();
  }

  void KeepStateWhileDown() {
    absl::MutexLock lock(&mu_);
    keeps_state_ = true;
  }
  void Answer(absl::Status status) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(status);
  }
  std::vector<std::string> restored_from() const {
    absl::MutexLock lock(&mu_);
    return restored_from_;
  }
  int configures() const {
    absl::MutexLock lock(&mu_);
    return configures_;
  }
  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int settles() const {
    absl::MutexLock lock(&mu_);
    return settles_;
  }

 private:
  bool Down() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++calls_;
    if (down_calls_ < 0) return true;  // never comes back
    if (down_calls_ == 0) return false;
    --down_calls_;
    if (!keeps_state_) configured_ = false;  // it restarts with nothing
    return true;
  }

  const std::string address_;
  mutable absl::Mutex mu_;
  int down_calls_ ABSL_GUARDED_BY(mu_);
  bool configured_ ABSL_GUARDED_BY(mu_);
  bool keeps_state_ ABSL_GUARDED_BY(mu_) = false;
  int configures_ ABSL_GUARDED_BY(mu_) = 0;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int settles_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status answer_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> restored_from_ ABSL_GUARDED_BY(mu_);
};

ValidCheckpoint Checkpoint() {
  ValidCheckpoint checkpoint;
  checkpoint.step = 600;
  checkpoint.path = "/checkpoints/ckpt-0000000600";
  return checkpoint;
}

TEST(WorkerReplicasTest, RestoreWaitsForAWorkerThatRestarts) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker restarting(1, 3, true);
  WorkerReplicas replicas({&steady, &restarting}, 2, absl::Seconds(30));

  ASSERT_TRUE(replicas.Restore(Checkpoint()).ok());

  // It was configured again once back, then restored from the checkpoint.
  EXPECT_EQ(restarting.configures(), 1);
  EXPECT_THAT(restarting.restored_from(),
              ::testing::ElementsAre(Checkpoint().path));
  EXPECT_THAT(steady.restored_from(),
              ::testing::ElementsAre(Checkpoint().path));
  EXPECT_EQ(steady.configures(), 0);
}

TEST(WorkerReplicasTest, RestoreConfiguresAWorkerBackUnconfigured) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker restarted(1, 0, false);
  WorkerReplicas replicas({&steady, &restarted}, 2, absl::Seconds(30));

  ASSERT_TRUE(replicas.Restore(Checkpoint()).ok());

  EXPECT_EQ(restarted.configures(), 1);
  EXPECT_THAT(restarted.restored_from(),
              ::testing::ElementsAre(Checkpoint().path));
}

TEST(WorkerReplicasTest, RestoreNamesAWorkerThatDoesNotComeBack) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker gone(1, -1, true);
  WorkerReplicas replicas({&steady, &gone}, 2, absl::Milliseconds(300));

  absl::Status s = replicas.Restore(Checkpoint());

  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("worker 1 (127.0.0.1:7001) did not "
                                     "come back within 300ms"));
  EXPECT_THAT(s.message(), HasSubstr("failed to connect"));
  EXPECT_GT(gone.calls(), 2);  // it was asked again while waited for
  EXPECT_TRUE(gone.restored_from().empty());
}

TEST(WorkerReplicasTest, RestoreReturnsAReadyWorkersRefusalAtOnce) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker refusing(1, 0, true);
  refusing.Answer(absl::InvalidArgumentError("variable dense/kernel: shape"));
  WorkerReplicas replicas({&steady, &refusing}, 2, absl::Seconds(30));

  absl::Status s = replicas.Restore(Checkpoint());

  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("worker 1 (127.0.0.1:7001): variable"));
  EXPECT_EQ(refusing.configures(), 0);
  EXPECT_EQ(refusing.calls(), 2);  // the restore and one health check
}

// The chaos soak's hybridsync_table seed 48104: worker 0, killed while
// it evaluated, answered unconfigured when the checkpoint after the epoch
// settled its row pushes, and the checkpoint failed (the job then ended
// with DATA_LOSS). A restarted worker has no push in flight.
TEST(WorkerReplicasTest, SettlingPassesAWorkerThatRestarted) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker restarted(1, 0, false);
  WorkerReplicas replicas({&steady, &restarted}, 2, absl::Seconds(30));

  ASSERT_TRUE(replicas.SettleRowPushes().ok());

  EXPECT_EQ(steady.settles(), 1);
  EXPECT_EQ(restarted.settles(), 0);
  EXPECT_EQ(restarted.configures(), 0);  // the recovery's to configure
}

// A stopped worker still holds its pushes in flight: the settling waits
// for it to answer again and then settles them.
TEST(WorkerReplicasTest, SettlingWaitsForAWorkerThatDoesNotAnswer) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker stopped(1, 3, true);
  stopped.KeepStateWhileDown();  // back configured, its pushes landed
  WorkerReplicas replicas({&steady, &stopped}, 2, absl::Seconds(30));

  ASSERT_TRUE(replicas.SettleRowPushes().ok());

  EXPECT_GT(stopped.calls(), 3);    // asked again while it was down
  EXPECT_EQ(stopped.settles(), 1);  // its pushes were settled, not passed
  EXPECT_EQ(stopped.configures(), 0);
}

// Under hybrid:ssp:S a worker's last S row pushes are in flight after its
// steps end: one that restarted lost them, and a checkpoint may not count
// their steps as trained.
TEST(WorkerReplicasTest, SettlingFailsAWorkerThatRestartedWithPushesInFlight) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker restarted(1, 0, false);
  WorkerReplicas replicas({&steady, &restarted}, 2, absl::Seconds(30),
                          /*pushes_in_flight=*/2);

  absl::Status s = replicas.SettleRowPushes();

  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(RowPushesLost(s)) << s;  // the epoch loop recovers from it
  EXPECT_THAT(s.message(), HasSubstr("worker 1 (127.0.0.1:7001) restarted "
                                     "with up to 2 of its row pushes in "
                                     "flight"));
  EXPECT_THAT(s.message(), HasSubstr("go back to its last checkpoint"));
  EXPECT_EQ(restarted.settles(), 0);
  EXPECT_EQ(restarted.configures(), 0);
}

// Killed while settled, back unconfigured under hybrid:ssp:S: the same.
TEST(WorkerReplicasTest, SettlingFailsAWorkerKilledWithPushesInFlight) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker killed(1, 3, true);  // then back, unconfigured
  WorkerReplicas replicas({&steady, &killed}, 2, absl::Seconds(30),
                          /*pushes_in_flight=*/2);

  absl::Status s = replicas.SettleRowPushes();

  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(RowPushesLost(s)) << s;  // the epoch loop recovers from it
  EXPECT_THAT(s.message(), HasSubstr("worker 1 (127.0.0.1:7001) restarted"));
  EXPECT_EQ(killed.settles(), 0);
}

TEST(WorkerReplicasTest, SettlingNamesAReadyWorkersFailedPush) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker failing(1, 0, true);
  failing.Answer(absl::InternalError("row push to ps 1: shard 3 refused"));
  WorkerReplicas replicas({&steady, &failing}, 2, absl::Seconds(30));

  absl::Status s = replicas.SettleRowPushes();

  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("worker 1 (127.0.0.1:7001) settling its "
                                     "row pushes: row push to ps 1"));
}

TEST(WorkerReplicasTest, SettlingNamesAWorkerThatDoesNotComeBack) {
  RestartingWorker steady(0, 0, true);
  RestartingWorker gone(1, -1, true);
  WorkerReplicas replicas({&steady, &gone}, 2, absl::Milliseconds(300));

  absl::Status s = replicas.SettleRowPushes();

  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("worker 1 (127.0.0.1:7001) did not come "
                                     "back within 300ms to settle its row "
                                     "pushes"));
}

}  // namespace
}  // namespace tessera
