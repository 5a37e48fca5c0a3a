// JobCheckpointer against a real parameter server on a loopback port:
// saving twice at one step, damaged checkpoints set aside, and a server
// that lost its shards.

#include "coordinator/job_checkpointer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/common/checkpoint/checkpoint_test_util.h"
#include "tests/ps_server/ps_test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing_util::ScratchDir;

class JobCheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    client_ = server_.NewClient();
    CreateShardsRequest request;
    for (int i = 0; i < 2; ++i) {
      *request.add_shards() = ps_test::MakeShardDef(
          "w", i, {8, 3}, 4 * i, 4, ps_test::GlorotInit(8, 3, 5));
    }
    *request.mutable_optimizer() = ps_test::SgdConfig(0.1f);
    CreateShardsResponse response;
    ASSERT_TRUE(client_->CreateShards(request, &response).ok());
    checkpointer_ = std::make_unique<JobCheckpointer>(
        dir_.path(), 3, std::vector<PsClient*>{client_.get()}, JobConfig());
  }

  static JobPosition At(int64_t step) {
    JobPosition p;
    p.global_step = step;
    p.epoch = 2;
    return p;
  }

  ps_test::TestPsServer server_;
  std::unique_ptr<PsClient> client_;
  ScratchDir dir_;
  std::unique_ptr<JobCheckpointer> checkpointer_;
};

TEST_F(JobCheckpointerTest, SavingTwiceAtOneStepKeepsTheFirst) {
  absl::StatusOr<std::string> first = checkpointer_->Save(At(40));
  ASSERT_TRUE(first.ok()) << first.status();
  const auto written = fs::last_write_time(*first + "/manifest");
  absl::StatusOr<std::string> again = checkpointer_->Save(At(40));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(fs::last_write_time(*first + "/manifest"), written);
}

TEST_F(JobCheckpointerTest, DamagedCheckpointIsSetAsideAndStepSavedAgain) {
  ASSERT_TRUE(checkpointer_->Save(At(10)).ok());
  absl::StatusOr<std::string> newest = checkpointer_->Save(At(20));
  ASSERT_TRUE(newest.ok()) << newest.status();
  {
    std::fstream f(*newest + "/ps-0.shards",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  std::vector<std::string> rejected;
  absl::StatusOr<ValidCheckpoint> latest = checkpointer_->Latest(&rejected);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 10);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_THAT(rejected[0], HasSubstr("ps-0.shards"));
  EXPECT_FALSE(fs::exists(*newest));
  EXPECT_TRUE(fs::exists(*newest + ".rejected/ps-0.shards"));

  // The step can be saved again, and the damaged copy does not count
  // among the kept ones.
  absl::StatusOr<std::string> resaved = checkpointer_->Save(At(20));
  ASSERT_TRUE(resaved.ok()) << resaved.status();
  EXPECT_EQ(*resaved, *newest);
  latest = checkpointer_->Latest();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 20);
}

TEST_F(JobCheckpointerTest, DamagedManifestAtTheSameStepIsRewritten) {
  absl::StatusOr<std::string> first = checkpointer_->Save(At(30));
  ASSERT_TRUE(first.ok()) << first.status();
  {
    std::fstream f(*first + "/ps-0.shards",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  absl::StatusOr<std::string> again = checkpointer_->Save(At(30));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(fs::exists(*first + ".rejected"));
  absl::StatusOr<ValidCheckpoint> latest = checkpointer_->Latest();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 30);
}

TEST_F(JobCheckpointerTest, ServerMissingShardsIsNotCommitted) {
  // The job created three shards there; the server holds two (as after a
  // restart that lost the third).
  checkpointer_->ExpectShards({3});
  absl::StatusOr<std::string> saved = checkpointer_->Save(At(50));
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(saved.status().message(), HasSubstr("saved 2 shards"));
  EXPECT_THAT(saved.status().message(), HasSubstr("holds 3"));
  absl::StatusOr<std::optional<std::string>> complete =
      checkpointer_->NewestComplete();
  ASSERT_TRUE(complete.ok());
  EXPECT_FALSE(complete->has_value());
  // The failed checkpoint leaves no partial files (the server's shard file
  // was written before the count was found short).
  EXPECT_TRUE(fs::is_empty(dir_.path())) << "a failed checkpoint's files stay";

  checkpointer_->ExpectShards({2});
  EXPECT_TRUE(checkpointer_->Save(At(50)).ok());
}

// A folder that was there before the failed save may hold someone's files:
// it stays (rotation decides about it).
TEST_F(JobCheckpointerTest, FailedSaveKeepsAFolderItDidNotCreate) {
  absl::StatusOr<std::string> first = checkpointer_->Save(At(60));
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string folder = *first;
  fs::remove(folder + "/manifest");  // incomplete again
  std::ofstream(folder + "/notes.txt") << "mine";
  checkpointer_->ExpectShards({3});
  EXPECT_FALSE(checkpointer_->Save(At(60)).ok());
  EXPECT_TRUE(fs::exists(folder + "/notes.txt"));
}

// Replicas whose row pushes settle (hybrid:ssp:S) and whose save fails,
// recording whether the server's file was there at each call.
class RecordingReplicas : public ReplicaCheckpoints {
 public:
  explicit RecordingReplicas(std::string server_file, absl::Status settle)
      : server_file_(std::move(server_file)), settle_(std::move(settle)) {}
  absl::Status Save(const std::string& directory, int64_t step,
                    SaveShardsResponse* response) override {
    server_file_at_save = fs::exists(server_file_);
    return absl::UnavailableError("no replica in this test");
  }
  absl::Status Restore(const ValidCheckpoint& checkpoint) override {
    return absl::OkStatus();
  }
  absl::Status SettleRowPushes() override {
    settled = true;
    server_file_at_settle = fs::exists(server_file_);
    return settle_;
  }
  bool settled = false;
  bool server_file_at_settle = false;
  bool server_file_at_save = false;

 private:
  const std::string server_file_;
  const absl::Status settle_;
};

// Issue #44: a hybrid:ssp:S worker's row pushes left in flight land before
// the servers save, so the cut holds every step before it.
TEST_F(JobCheckpointerTest, RowPushesInFlightSettleBeforeTheServersSave) {
  RecordingReplicas replicas(dir_.path() + "/ckpt-0000000070/ps-0.shards",
                             absl::OkStatus());
  checkpointer_->SetReplicas(&replicas);
  EXPECT_FALSE(checkpointer_->Save(At(70)).ok());  // the replica's save
  EXPECT_TRUE(replicas.settled);
  EXPECT_FALSE(replicas.server_file_at_settle);
  EXPECT_TRUE(replicas.server_file_at_save);
}

TEST_F(JobCheckpointerTest, ARowPushThatFailedToSettleFailsTheCheckpoint) {
  RecordingReplicas replicas(
      dir_.path() + "/ckpt-0000000080/ps-0.shards",
      absl::UnavailableError("worker 1 settling its row pushes: ps down"));
  checkpointer_->SetReplicas(&replicas);
  absl::StatusOr<std::string> saved = checkpointer_->Save(At(80));
  ASSERT_FALSE(saved.ok());
  EXPECT_THAT(saved.status().message(), HasSubstr("settling its row pushes"));
  EXPECT_FALSE(fs::exists(dir_.path() + "/ckpt-0000000080"));
}

// Issue #48: a worker that restarted before the job's first checkpoint
// (step 0) had no row push in flight; the settle would fail the job.
TEST_F(JobCheckpointerTest, TheFirstCheckpointDoesNotSettleRowPushes) {
  RecordingReplicas replicas(
      dir_.path() + "/ckpt-0000000000/ps-0.shards",
      RowPushesLostError("worker 1 restarted with up to 2 of its row pushes "
                         "in flight"));
  checkpointer_->SetReplicas(&replicas);
  absl::StatusOr<std::string> saved = checkpointer_->Save(At(0));
  EXPECT_FALSE(replicas.settled);
  EXPECT_FALSE(RowPushesLost(saved.status())) << saved.status();
  EXPECT_TRUE(replicas.server_file_at_save);
}

}  // namespace
}  // namespace tessera
