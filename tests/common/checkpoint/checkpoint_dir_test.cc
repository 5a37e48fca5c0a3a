#include "common/checkpoint/checkpoint_dir.h"

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/checkpoint/checkpoint_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::ReadWholeFile;
using testing_util::ScratchDir;
using testing_util::WriteWholeFile;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::vector<int64_t> Steps(const CheckpointDir& dir) {
  auto refs = dir.List();
  EXPECT_TRUE(refs.ok()) << refs.status();
  std::vector<int64_t> steps;
  if (refs.ok()) {
    for (const CheckpointRef& ref : *refs) steps.push_back(ref.step);
  }
  return steps;
}

// Writes ps files for `num_ps` servers, one shard of variable "w" each, and
// returns the manifest the coordinator would commit.
CheckpointManifest WriteShards(const CheckpointDir& dir, int64_t step,
                               int num_ps) {
  auto path = dir.Prepare(step);
  EXPECT_TRUE(path.ok()) << path.status();
  CheckpointManifest manifest;
  manifest.set_global_step(step);
  manifest.set_epoch(3);
  manifest.set_next_step_in_epoch(17);
  manifest.set_num_ps(num_ps);
  manifest.mutable_optimizer()->set_learning_rate(0.5f);
  CheckpointVariable* var = manifest.add_variables();
  var->set_name("w");
  var->mutable_shape()->add_dims(num_ps);
  var->mutable_shape()->add_dims(2);
  var->set_dtype(DT_FLOAT);
  var->set_kind("dense");
  for (int ps = 0; ps < num_ps; ++ps) {
    const std::string file = PsCheckpointFileName(ps);
    auto writer = CheckpointWriter::Create(*path + "/" + file);
    EXPECT_TRUE(writer.ok()) << writer.status();
    const std::vector<float> values = {static_cast<float>(step),
                                       static_cast<float>(ps)};
    const std::string entry = absl::StrCat("w/part_", ps);
    EXPECT_TRUE((*writer)
                    ->WriteEntry(entry, {CheckpointArrayView::Of<float>(
                                            "values", values, {1, 2})})
                    .ok());
    auto summary = (*writer)->Finish();
    EXPECT_TRUE(summary.ok()) << summary.status();
    CheckpointFile* f = manifest.add_files();
    f->set_name(file);
    f->set_ps(ps);
    f->set_size_bytes(summary->size_bytes);
    f->set_crc32c(summary->crc32c);
    CheckpointShard* shard = var->add_shards();
    shard->set_index(ps);
    shard->set_row_offset(ps);
    shard->mutable_shape()->add_dims(1);
    shard->mutable_shape()->add_dims(2);
    shard->set_ps(ps);
    shard->set_file(file);
    shard->set_entry(entry);
  }
  return manifest;
}

void WriteCheckpoint(const CheckpointDir& dir, int64_t step, int num_ps = 2) {
  ASSERT_TRUE(dir.Commit(WriteShards(dir, step, num_ps)).ok());
}

void FlipLastDataByte(const std::string& path) {
  std::string bytes = ReadWholeFile(path);
  // Footer (20) + data CRC (4) precede the end; the byte before them is the
  // last data byte.
  bytes[bytes.size() - 25] ^= 0x10;
  WriteWholeFile(path, bytes);
}

TEST(CheckpointDirNames, AreZeroPaddedAndParsedStrictly) {
  EXPECT_EQ(CheckpointDirName(120), "ckpt-0000000120");
  EXPECT_EQ(CheckpointDirName(12345678901), "ckpt-12345678901");
  EXPECT_EQ(PsCheckpointFileName(1), "ps-1.shards");
  int64_t step = -1;
  EXPECT_TRUE(ParseCheckpointDirName("ckpt-0000000120", &step));
  EXPECT_EQ(step, 120);
  EXPECT_TRUE(ParseCheckpointDirName("ckpt-12345678901", &step));
  EXPECT_EQ(step, 12345678901);
  for (const char* bad :
       {"ckpt-120", "ckpt-00000000120", "ckpt-0000000120.tmp-77", "ckpt-",
        "ckpt-000000012a", "ckpt--000000012", "model-0000000120", ""}) {
    EXPECT_FALSE(ParseCheckpointDirName(bad, &step)) << bad;
  }
}

TEST(CheckpointDir, ManifestRoundTripsThroughTheFileLayer) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path() + "/root");
  WriteCheckpoint(dir, 120);
  auto latest = dir.LatestValid();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 120);
  EXPECT_EQ(latest->path, scratch.path() + "/root/ckpt-0000000120");
  const CheckpointManifest& m = latest->manifest;
  EXPECT_EQ(m.global_step(), 120);
  EXPECT_EQ(m.epoch(), 3);
  EXPECT_EQ(m.next_step_in_epoch(), 17);
  EXPECT_EQ(m.num_ps(), 2);
  EXPECT_FLOAT_EQ(m.optimizer().learning_rate(), 0.5f);
  ASSERT_EQ(m.variables_size(), 1);
  EXPECT_EQ(m.variables(0).shards(1).entry(), "w/part_1");
  ASSERT_EQ(m.files_size(), 2);
  EXPECT_EQ(m.files(1).name(), "ps-1.shards");
}

TEST(CheckpointDir, EmptyOrMissingRootHasNoCheckpoint) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path() + "/absent");
  EXPECT_TRUE(Steps(dir).empty());
  EXPECT_EQ(dir.LatestValid().status().code(), absl::StatusCode::kNotFound);
}

// A root that is a file is named once with the system's reason (it read
// "Not a directory: Not a directory").
TEST(CheckpointDir, RootThatIsAFileSaysWhyOnce) {
  ScratchDir scratch;
  std::ofstream(scratch.path() + "/file") << "x";
  CheckpointDir dir(scratch.path() + "/file");
  absl::StatusOr<std::string> prepared = dir.Prepare(1);
  ASSERT_FALSE(prepared.ok());
  const std::string message(prepared.status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("cannot create " + scratch.path() +
                                            "/file"));
  EXPECT_EQ(message.find("directory"), message.rfind("directory")) << message;
}

TEST(CheckpointDir, ListsNewestFirstAndIgnoresOtherNames) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 5);
  WriteCheckpoint(dir, 120);
  WriteCheckpoint(dir, 40);
  ASSERT_TRUE(std::filesystem::create_directory(scratch.path() +
                                                "/ckpt-0000000999.tmp-12"));
  WriteWholeFile(scratch.path() + "/ckpt-0000000777", "a file, not a dir");
  WriteWholeFile(scratch.path() + "/notes.txt", "");
  EXPECT_THAT(Steps(dir), ElementsAre(120, 40, 5));
}

TEST(CheckpointDir, FallsBackWhenTheNewestFileIsCorrupt) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 100);
  WriteCheckpoint(dir, 200);
  FlipLastDataByte(dir.PathFor(200) + "/ps-1.shards");
  std::vector<std::string> rejected;
  auto latest = dir.LatestValid(&rejected);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 100);
  EXPECT_EQ(latest->manifest.global_step(), 100);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0],
            "checkpoint ckpt-0000000200/ps-1.shards: entry 'w/part_1' data "
            "CRC mismatch (entry at offset 16)");
}

TEST(CheckpointDir, FallsBackWhenTheNewestHasNoManifest) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 100);
  WriteShards(dir, 200, 2);  // the coordinator died before Commit
  // A manifest cut short by the crash, under its temporary name.
  WriteWholeFile(dir.PathFor(200) + "/manifest.tmp-4242", "TSRACKPT");
  std::vector<std::string> rejected;
  auto latest = dir.LatestValid(&rejected);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 100);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0],
            "checkpoint ckpt-0000000200 is incomplete: no manifest");
}

TEST(CheckpointDir, FallsBackWhenTheNewestIsTruncatedOrItsManifestCorrupt) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 100);
  WriteCheckpoint(dir, 200);
  WriteCheckpoint(dir, 300);
  const std::string ps0 = dir.PathFor(300) + "/ps-0.shards";
  const std::string bytes = ReadWholeFile(ps0);
  WriteWholeFile(ps0, bytes.substr(0, bytes.size() / 2));
  FlipLastDataByte(dir.PathFor(200) + "/manifest");
  std::vector<std::string> rejected;
  auto latest = dir.LatestValid(&rejected);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 100);
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_THAT(rejected[0],
              HasSubstr("checkpoint ckpt-0000000300/ps-0.shards: truncated"));
  EXPECT_THAT(rejected[1], HasSubstr("checkpoint ckpt-0000000200/manifest: "
                                     "entry 'manifest' data CRC mismatch"));
}

TEST(CheckpointDir, RejectsAFileFromAnotherAttempt) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 100);
  WriteCheckpoint(dir, 200);
  // A valid file, but not the one the manifest recorded.
  std::filesystem::copy_file(dir.PathFor(100) + "/ps-1.shards",
                             dir.PathFor(200) + "/ps-1.shards",
                             std::filesystem::copy_options::overwrite_existing);
  std::vector<std::string> rejected;
  auto latest = dir.LatestValid(&rejected);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 100);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_THAT(rejected[0], HasSubstr("checkpoint ckpt-0000000200/ps-1.shards: "
                                     "has "));
  EXPECT_THAT(rejected[0], HasSubstr("the manifest records"));
}

TEST(CheckpointDir, RejectsAManifestInTheWrongDirectory) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 100);
  WriteCheckpoint(dir, 200);
  std::filesystem::copy_file(dir.PathFor(100) + "/manifest",
                             dir.PathFor(200) + "/manifest",
                             std::filesystem::copy_options::overwrite_existing);
  std::vector<std::string> rejected;
  auto latest = dir.LatestValid(&rejected);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 100);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_THAT(rejected[0], HasSubstr("records global step 100, not 200"));
}

TEST(CheckpointDir, NoValidCheckpointIsNotFound) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 100);
  FlipLastDataByte(dir.PathFor(100) + "/ps-0.shards");
  std::vector<std::string> rejected;
  auto latest = dir.LatestValid(&rejected);
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rejected.size(), 1u);
}

TEST(CheckpointDir, StrayTemporaryFilesAreIgnored) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 100);
  // Leftovers of a ps that crashed while rewriting its file.
  WriteWholeFile(dir.PathFor(100) + "/ps-0.shards.tmp-999", "garbage");
  auto latest = dir.LatestValid();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 100);
}

TEST(CheckpointDir, CommitRequiresEveryFileWithItsSize) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  CheckpointManifest manifest = WriteShards(dir, 100, 2);
  ASSERT_TRUE(std::filesystem::remove(dir.PathFor(100) + "/ps-1.shards"));
  absl::Status missing = dir.Commit(manifest);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr("ps-1.shards (ps 1) is not there"));
  manifest.mutable_files(1)->set_name("ps-0.shards");
  manifest.mutable_files(1)->set_size_bytes(1);
  absl::Status size = dir.Commit(manifest);
  EXPECT_EQ(size.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(size.message()), HasSubstr("ps 1 reported 1"));
  manifest.mutable_files(1)->set_name("../escape");
  EXPECT_EQ(dir.Commit(manifest).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Exists(dir.PathFor(100) + "/manifest"));
}

TEST(CheckpointDir, PrepareRefusesToReopenACompleteCheckpoint) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteShards(dir, 100, 1);
  EXPECT_TRUE(dir.Prepare(100).ok());  // still incomplete: a retry is fine
  WriteCheckpoint(dir, 200, 1);
  EXPECT_EQ(dir.Prepare(200).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(dir.Prepare(-1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckpointDir, KeepLastKeepsTheNewestCompleteOnes) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  for (int64_t step : {10, 20, 30, 40, 50}) WriteCheckpoint(dir, step);
  ASSERT_TRUE(dir.KeepLast(2).ok());
  EXPECT_THAT(Steps(dir), ElementsAre(50, 40));
  ASSERT_TRUE(dir.KeepLast(5).ok());
  EXPECT_THAT(Steps(dir), ElementsAre(50, 40));
  auto latest = dir.LatestValid();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 50);
  EXPECT_EQ(dir.KeepLast(0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckpointDir, KeepLastSparesAnInProgressCheckpointOnly) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 10);
  WriteShards(dir, 15, 2);  // abandoned attempt between complete ones
  WriteCheckpoint(dir, 20);
  WriteCheckpoint(dir, 30);
  WriteShards(dir, 40, 2);  // being written now
  ASSERT_TRUE(dir.KeepLast(2).ok());
  EXPECT_THAT(Steps(dir), ElementsAre(40, 30, 20));
  // The new checkpoint completes; only now does 20 go.
  ASSERT_TRUE(dir.Commit(WriteShards(dir, 40, 2)).ok());
  ASSERT_TRUE(dir.KeepLast(2).ok());
  EXPECT_THAT(Steps(dir), ElementsAre(40, 30));
}

// A folder named like a checkpoint that holds a file no checkpoint writes
// is the user's: rotation leaves it, and the file, alone.
TEST(CheckpointDir, KeepLastNeverDeletesAFolderWithForeignFiles) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  std::filesystem::create_directories(dir.PathFor(1));
  std::ofstream(dir.PathFor(1) + "/notes.txt") << "mine";
  WriteCheckpoint(dir, 10);
  std::ofstream(dir.PathFor(10) + "/README") << "also mine";
  WriteCheckpoint(dir, 20);
  WriteCheckpoint(dir, 30);
  ASSERT_TRUE(dir.KeepLast(1).ok());
  EXPECT_TRUE(std::filesystem::exists(dir.PathFor(1) + "/notes.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir.PathFor(10) + "/README"));
  EXPECT_FALSE(std::filesystem::exists(dir.PathFor(20)));
  EXPECT_TRUE(std::filesystem::exists(dir.PathFor(30)));
}

// A mirrored or hybrid job's checkpoints hold the workers' replica: they
// rotate as the servers' do (they used to be kept forever as foreign).
TEST(CheckpointDir, KeepLastDeletesCheckpointsHoldingAReplica) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  for (int64_t step : {10, 20, 30}) {
    WriteCheckpoint(dir, step);
    std::ofstream(dir.PathFor(step) + "/" + kReplicaCheckpointFileName)
        << "replica";
  }
  ASSERT_TRUE(dir.KeepLast(1).ok());
  EXPECT_THAT(Steps(dir), ElementsAre(30));
  EXPECT_FALSE(std::filesystem::exists(dir.PathFor(10)));
}

TEST(CheckpointDir, KeepLastCountsOnlyVerifiedManifests) {
  ScratchDir scratch;
  CheckpointDir dir(scratch.path());
  WriteCheckpoint(dir, 10);
  WriteCheckpoint(dir, 20);
  WriteCheckpoint(dir, 30);
  FlipLastDataByte(dir.PathFor(30) + "/manifest");
  ASSERT_TRUE(dir.KeepLast(2).ok());
  // 30 no longer counts as complete and is the newest: kept as possibly in
  // progress; 20 and 10 are the two complete ones.
  EXPECT_THAT(Steps(dir), ElementsAre(30, 20, 10));
  auto latest = dir.LatestValid();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 20);
}

}  // namespace
}  // namespace tessera
