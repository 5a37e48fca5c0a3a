#include "worker/params/replica_checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/embedded/embedded_shards.h"
#include "ps_server/restore/variable_restore.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<VariableDef> Variables(int64_t rows = 4) {
  VariableDef kernel{"dense_0/kernel", {rows, 3}, {}};
  kernel.initializer.set_kind(Initializer::UNIFORM);
  kernel.initializer.set_minval(-1);
  kernel.initializer.set_maxval(1);
  kernel.initializer.set_seed(7);
  VariableDef bias{"dense_0/bias", {3}, {}};
  return {kernel, bias};
}

OptimizerConfig Adam() {
  OptimizerConfig c;
  c.set_learning_rate(0.01f);
  c.mutable_adam()->set_beta1(0.9f);
  c.mutable_adam()->set_beta2(0.999f);
  c.mutable_adam()->set_epsilon(1e-7f);
  return c;
}

// A replica after `steps` updates with made-up gradients, so its values,
// Adam's moments and t all differ from a fresh one's.
std::unique_ptr<MirroredParameters> Trained(int steps) {
  std::unique_ptr<MirroredParameters> p =
      *MirroredParameters::Create(Variables(), Adam());
  for (int s = 0; s < steps; ++s) {
    float x = 0.5f * s;
    for (absl::Span<float> g : p->gradients()) {
      for (float& v : g) v = (x += 0.25f) * (s % 2 ? -1.0f : 1.0f);
    }
    p->SetWeight(1.0);
    EXPECT_TRUE(p->ApplyReduced().ok());
  }
  return p;
}

class ReplicaCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat(
               "replica_ckpt_", getpid(), "_",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // The manifest a chief would write for a replica saved alone.
  static CheckpointManifest ManifestOf(const SaveShardsResponse& saved) {
    CheckpointManifest manifest;
    *manifest.add_files() = saved.file();
    for (const CheckpointVariable& v : saved.variables()) {
      *manifest.add_variables() = v;
    }
    return manifest;
  }

  fs::path dir_;
};

TEST_F(ReplicaCheckpointTest, RestoresValuesSlotsAndStepCount) {
  std::unique_ptr<MirroredParameters> trained = Trained(3);
  SaveShardsResponse saved;
  ASSERT_TRUE(SaveReplica(*trained, dir_.string(), &saved).ok());
  EXPECT_EQ(saved.file().name(), kReplicaCheckpointFileName);
  EXPECT_EQ(saved.file().ps(), kReplicaCheckpointPs);
  ASSERT_EQ(saved.variables_size(), 2);
  EXPECT_THAT(saved.variables(0).slots(), ::testing::ElementsAre("m", "v"));

  std::unique_ptr<MirroredParameters> fresh =
      *MirroredParameters::Create(Variables(), Adam());
  ASSERT_NE(fresh->Checksum(), trained->Checksum());
  ASSERT_TRUE(
      RestoreReplica(ManifestOf(saved), dir_.string(), fresh.get()).ok());
  EXPECT_EQ(fresh->Checksum(), trained->Checksum());
  EXPECT_EQ(fresh->updates(), 3);
  for (int v = 0; v < 2; ++v) {
    EXPECT_EQ(fresh->slots(v), trained->slots(v)) << "variable " << v;
  }
  // The same next step on both gives the same bits: Adam's moments and t
  // came back, not only the values.
  for (MirroredParameters* p : {fresh.get(), trained.get()}) {
    for (absl::Span<float> g : p->gradients()) {
      for (float& v : g) v = 0.125f;
    }
    p->SetWeight(1.0);
    ASSERT_TRUE(p->ApplyReduced().ok());
  }
  EXPECT_EQ(fresh->Checksum(), trained->Checksum());
}

// An async job's checkpoint: each variable on one server's shards. A
// replica (a hybrid job resuming it) reads it as a server would.
TEST_F(ReplicaCheckpointTest, RestoresFromAParameterServersCheckpoint) {
  EmbeddedShards server;
  for (const VariableDef& v : Variables())
    ASSERT_TRUE(server.Add(v, Adam()).ok());
  std::vector<float> gradient(server.num_elements(0), 0.5f);
  server.ApplyGradient(0, gradient);
  JobConfig job;
  *job.mutable_optimizer() = Adam();
  absl::StatusOr<std::string> folder =
      server.SaveCheckpoint(job, dir_.string(), 10, 2);
  ASSERT_TRUE(folder.ok()) << folder.status();
  absl::StatusOr<ValidCheckpoint> latest =
      CheckpointDir(dir_.string()).LatestValid();
  ASSERT_TRUE(latest.ok()) << latest.status();

  std::unique_ptr<MirroredParameters> replica =
      *MirroredParameters::Create(Variables(), Adam());
  ASSERT_TRUE(
      RestoreReplica(latest->manifest, latest->path, replica.get()).ok());
  std::vector<float> expected(server.num_elements(0));
  server.ReadValues(0, absl::MakeSpan(expected));
  const absl::Span<const float> got = replica->values()[0];
  EXPECT_EQ(std::vector<float>(got.begin(), got.end()), expected);
  EXPECT_EQ(replica->updates(), 1);
}

// What tessera_export and tessera_predict use reads a replica's file as a
// server's.
TEST_F(ReplicaCheckpointTest, CheckpointReadersReadTheReplica) {
  std::unique_ptr<MirroredParameters> trained = Trained(2);
  SaveShardsResponse saved;
  ASSERT_TRUE(SaveReplica(*trained, dir_.string(), &saved).ok());
  std::vector<VariableToRestore> wanted;
  for (const VariableDef& v : Variables()) wanted.push_back({v, Adam()});
  absl::StatusOr<std::vector<RestoredVariable>> read =
      RestoreVariables(ManifestOf(saved), dir_.string(), wanted);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 2u);
  for (int v = 0; v < 2; ++v) {
    const absl::Span<const float> values = trained->values()[v];
    EXPECT_EQ((*read)[v].values,
              std::vector<float>(values.begin(), values.end()));
  }
}

TEST_F(ReplicaCheckpointTest, ADifferentShapeIsRefusedNamingTheVariable) {
  std::unique_ptr<MirroredParameters> trained = Trained(1);
  SaveShardsResponse saved;
  ASSERT_TRUE(SaveReplica(*trained, dir_.string(), &saved).ok());
  std::unique_ptr<MirroredParameters> other =
      *MirroredParameters::Create(Variables(/*rows=*/5), Adam());
  const uint32_t before = other->Checksum();
  absl::Status s =
      RestoreReplica(ManifestOf(saved), dir_.string(), other.get());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("dense_0/kernel"));
  EXPECT_EQ(other->Checksum(), before);  // nothing changed
}

TEST_F(ReplicaCheckpointTest, ATruncatedFileIsDataLoss) {
  std::unique_ptr<MirroredParameters> trained = Trained(1);
  SaveShardsResponse saved;
  ASSERT_TRUE(SaveReplica(*trained, dir_.string(), &saved).ok());
  const fs::path file = dir_ / kReplicaCheckpointFileName;
  fs::resize_file(file, fs::file_size(file) / 2);
  std::unique_ptr<MirroredParameters> fresh =
      *MirroredParameters::Create(Variables(), Adam());
  absl::Status s =
      RestoreReplica(ManifestOf(saved), dir_.string(), fresh.get());
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr(kReplicaCheckpointFileName));
}

}  // namespace
}  // namespace tessera
