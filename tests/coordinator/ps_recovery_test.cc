// PsRecovery against a real parameter server on a loopback port and fake
// workers: a checkpoint whose settle found a worker's row pushes lost
// (hybrid:ssp) takes the job back to its last checkpoint, boundedly.

#include "coordinator/ps_recovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/cluster_health.h"
#include "coordinator/control/job_status_board.h"
#include "coordinator/job_checkpointer.h"
#include "coordinator/replica_losses.h"
#include "tests/common/checkpoint/checkpoint_test_util.h"
#include "tests/coordinator/fake_worker.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace ps_recovery_testing {

using ::testing::HasSubstr;
using testing_util::ScratchDir;

constexpr int64_t kRowElements = 3;

// The workers' replicas as the checkpoints see them: the settle fails as
// `settle` says, and each Restore is recorded.
class SettlingReplicas : public ReplicaCheckpoints {
 public:
  explicit SettlingReplicas(absl::Status settle) : settle_(std::move(settle)) {}
  absl::Status Save(const std::string&, int64_t, SaveShardsResponse*) override {
    return absl::UnavailableError("the settle comes first in this test");
  }
  absl::Status Restore(const ValidCheckpoint& checkpoint) override {
    restored.push_back(checkpoint.path);
    return absl::OkStatus();
  }
  absl::Status SettleRowPushes() override { return settle_; }
  std::vector<std::string> restored;

 private:
  const absl::Status settle_;
};

class PsRecoveryTest : public coordinator_testing::CoordinatorFixture {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient();
    CreateShardsRequest request;
    for (int i = 0; i < 2; ++i) {
      *request.add_shards() = ps_test::MakeShardDef(
          "w", i, {8, kRowElements}, 4 * i, 4, ps_test::GlorotInit(8, 3, 5));
    }
    *request.mutable_optimizer() = ps_test::SgdConfig(0.1f);
    CreateShardsResponse response;
    ASSERT_TRUE(client_->CreateShards(request, &response).ok());
    checkpointer_ = std::make_unique<JobCheckpointer>(
        dir_.path(), 3, std::vector<PsClient*>{client_.get()}, JobConfig());
    Start(2);
    out_ = open_memstream(&out_buffer_, &out_size_);
    health_ =
        std::make_unique<ClusterHealth>(std::vector<PsClient*>{client_.get()},
                                        std::vector<WorkerTask*>{}, out_, 1);
    PsRecoveryOptions options;
    options.timeout = absl::Seconds(5);
    recovery_ = std::make_unique<PsRecovery>(
        checkpointer_.get(), health_.get(), coord_.get(), &board_,
        [this] {
          ++variables_created_;
          return absl::OkStatus();
        },
        out_, options);
  }
  void TearDown() override {
    recovery_.reset();
    health_.reset();
    std::fclose(out_);
    std::free(out_buffer_);
  }

  static JobPosition At(int64_t step) {
    JobPosition p;
    p.global_step = step;
    p.epoch = 2;
    return p;
  }
  std::vector<float> Row(int64_t id) {
    std::vector<float> row(kRowElements);
    EXPECT_TRUE(
        client_->PullRows("w/part_0", {id}, kRowElements, absl::MakeSpan(row))
            .ok());
    return row;
  }
  // A surviving worker's row push after the checkpoint.
  void PushRow(int64_t id) {
    const std::vector<float> grad(kRowElements, 1.0f);
    PushResponse response;
    ASSERT_TRUE(
        client_->PushRows("w/part_0", {id}, kRowElements, grad, &response)
            .ok());
  }
  std::string Output() {
    std::fflush(out_);
    return std::string(out_buffer_, out_size_);
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  ScratchDir dir_;
  std::unique_ptr<JobCheckpointer> checkpointer_;
  std::unique_ptr<ClusterHealth> health_;
  JobStatusBoard board_;
  std::unique_ptr<PsRecovery> recovery_;
  int variables_created_ = 0;
  std::FILE* out_ = nullptr;
  char* out_buffer_ = nullptr;
  size_t out_size_ = 0;
};

absl::Status LostPushes() {
  return RowPushesLostError(
      "worker 1 (127.0.0.1:7001) restarted with up to 2 of its row pushes in "
      "flight (hybrid:ssp)");
}

// The chaos soak's seed 48125 (hybridssp2_table) lost its job here: the
// settle before a checkpoint failed, and the job ended with DATA_LOSS.
TEST_F(PsRecoveryTest, LostRowPushesTakeTheJobBackToItsLastCheckpoint) {
  absl::StatusOr<std::string> last = checkpointer_->Save(At(40));
  ASSERT_TRUE(last.ok()) << last.status();
  const std::vector<float> at_checkpoint = Row(1);
  PushRow(1);
  ASSERT_NE(Row(1), at_checkpoint);
  SettlingReplicas replicas(LostPushes());
  checkpointer_->SetReplicas(&replicas);
  absl::StatusOr<std::string> failed = checkpointer_->Save(At(60));
  ASSERT_FALSE(failed.ok());
  ASSERT_TRUE(RowPushesLost(failed.status())) << failed.status();

  absl::StatusOr<JobPosition> resumed = recovery_->Recover(failed.status());

  ASSERT_TRUE(resumed.ok()) << resumed.status() << "\n" << Output();
  EXPECT_EQ(resumed->global_step, 40);
  EXPECT_EQ(resumed->epoch, 2);
  EXPECT_THAT(replicas.restored, ::testing::ElementsAre(*last));
  // The survivor's push since the checkpoint is gone with the restore.
  EXPECT_EQ(Row(1), at_checkpoint);
  EXPECT_THAT(Output(), HasSubstr("a worker's row pushes in flight were "
                                  "lost; training paused"));
  EXPECT_EQ(board_.Snapshot().ps_recoveries(), 1);
}

TEST_F(PsRecoveryTest, AnotherAbortedSaveIsNotRecoveredFrom) {
  ASSERT_TRUE(checkpointer_->Save(At(40)).ok());
  const absl::Status other = absl::AbortedError("worker 1 went away");

  absl::StatusOr<JobPosition> resumed = recovery_->Recover(other);

  EXPECT_EQ(resumed.status(), other);
}

// A worker that dies before every checkpoint cannot loop the job forever.
TEST_F(PsRecoveryTest, LostRowPushesAtOneCheckpointAreRecoveredBoundedly) {
  absl::StatusOr<std::string> last = checkpointer_->Save(At(40));
  ASSERT_TRUE(last.ok()) << last.status();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<JobPosition> resumed = recovery_->Recover(LostPushes());
    ASSERT_TRUE(resumed.ok()) << "recovery " << i << ": " << resumed.status();
  }

  absl::StatusOr<JobPosition> again = recovery_->Recover(LostPushes());

  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(RowPushesLost(again.status()));
  EXPECT_THAT(again.status().message(),
              HasSubstr(absl::StrCat("went back to ", *last,
                                     " 3 times in a "
                                     "row")));
  EXPECT_THAT(again.status().message(), HasSubstr("giving up"));
  // A checkpoint written since starts the count again.
  ASSERT_TRUE(checkpointer_->Save(At(60)).ok());
  EXPECT_TRUE(recovery_->Recover(LostPushes()).ok());
}

// A recovery for another reason between them (here a replica's missed
// step, not marked as lost pushes) does not start the count again: the
// job went back to the same checkpoint. The recovery past the bound gives
// up before it waits for anything, re-creates variables or pauses.
TEST_F(PsRecoveryTest, AnotherRecoveryBetweenDoesNotClearTheLostPushCount) {
  ASSERT_TRUE(checkpointer_->Save(At(40)).ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(recovery_->Recover(LostPushes()).ok()) << "recovery " << i;
  }
  coord_->replica_losses()->Lost();
  ASSERT_TRUE(
      recovery_->Recover(absl::UnavailableError("worker 1 failed a step"))
          .ok());
  ASSERT_TRUE(recovery_->Recover(LostPushes()).ok());
  const int created = variables_created_;
  const size_t paused = Output().size();

  absl::StatusOr<JobPosition> again = recovery_->Recover(LostPushes());

  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr("giving up"));
  EXPECT_EQ(variables_created_, created);
  EXPECT_THAT(Output().substr(paused),
              ::testing::Not(HasSubstr("training paused")));
}

}  // namespace ps_recovery_testing
}  // namespace tessera
