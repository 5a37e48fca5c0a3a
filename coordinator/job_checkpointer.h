#ifndef TESSERA_COORDINATOR_JOB_CHECKPOINTER_H_
#define TESSERA_COORDINATOR_JOB_CHECKPOINTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "proto/checkpoint.pb.h"
#include "proto/job.pb.h"
#include "ps_server/client/ps_client.h"

namespace tessera {

// Where a job stands when a checkpoint is taken: the steps scheduled so
// far, and the data position (the epoch in progress and its first step
// not yet applied), so a restored job visits each example of that epoch
// exactly once.
struct JobPosition {
  int64_t global_step = 0;
  int epoch = 1;
  int64_t next_step_in_epoch = 0;
  int64_t next_sync_step = 0;  // sync mode's next global step
  // With next_step_in_epoch > 0 (a stop inside the epoch): what the
  // epoch's steps before it trained.
  EpochProgress progress;
};

// The workers' replicas of a mirrored or hybrid job, as its checkpoints
// see them (worker/params/replica_checkpoint.h): one saves the variables
// every worker keeps whole, beside the servers' shards; all restore them.
class ReplicaCheckpoints {
 public:
  virtual ~ReplicaCheckpoints() = default;
  // Writes the replica into the checkpoint folder `directory`; `response`
  // lists its file and variables for the manifest.
  virtual absl::Status Save(const std::string& directory, int64_t step,
                            SaveShardsResponse* response) = 0;
  // Every replica loads `checkpoint`, and their all-reduce starts over.
  virtual absl::Status Restore(const ValidCheckpoint& checkpoint) = 0;
  // Before the servers save: every worker's row pushes still under way
  // land (hybrid:ssp:S leaves up to S of them in flight after a step
  // ended), so the servers hold every step before the checkpoint whole.
  virtual absl::Status SettleRowPushes() = 0;
};

// SettleRowPushes' failure when a worker's row pushes in flight went with
// its process (it restarted or was killed): ABORTED naming the worker, as
// `message` says, and marked so that RowPushesLost tells it from other
// failures. No checkpoint can count the steps whose rows those pushes
// carried; the job goes back to its last checkpoint (PsRecovery).
absl::Status RowPushesLostError(absl::string_view message);
bool RowPushesLost(const absl::Status& status);

// Takes and restores a job's checkpoints through its parameter servers,
// following the protocol of common/checkpoint/checkpoint_dir.h: the coordinator
// prepares ckpt-<step>/, every server writes its own file, and the
// manifest, written last, makes the checkpoint complete.
//
// Thread safety: one caller at a time (the training loop).
class JobCheckpointer {
 public:
  // `ps` are not owned and must outlive this; ps[k] is task k. `keep` >= 1
  // complete checkpoints are kept.
  JobCheckpointer(std::string root, int keep, std::vector<PsClient*> ps,
                  JobConfig job);

  // Mirrored and hybrid jobs: checkpoints hold the workers' replica too
  // (saved after the servers' shards, restored before them, so a worker's
  // row pushes in flight end before the servers go back). `replicas` is
  // not owned and must outlive this.
  void SetReplicas(ReplicaCheckpoints* replicas) { replicas_ = replicas; }
  bool has_replicas() const { return replicas_ != nullptr; }

  const std::string& root() const { return dir_.root(); }

  // How many shards each server holds once the variables exist (per_ps[k]
  // for task k). Save then refuses a checkpoint in which a server saved
  // fewer: one that restarted and lost its shards would otherwise write a
  // valid-looking file without them.
  void ExpectShards(std::vector<int64_t> per_ps);

  // With replicas, their row pushes in flight land first
  // (ReplicaCheckpoints::SettleRowPushes), except at step 0 (no step
  // trained, so none can be missing). Every parameter server saves its
  // shards, in parallel; then the
  // manifest (variables, shapes, partitioning, position, the job) is
  // committed and checkpoints beyond the newest `keep` are deleted.
  // Returns the checkpoint's directory. A failure leaves no manifest, so a
  // half-written checkpoint is never restored. A valid checkpoint already
  // at this step is kept and its directory returned (saving twice at one
  // step is not an error); an invalid one there is set aside first. A
  // failed checkpoint's folder, if this call created it, is removed.
  absl::StatusOr<std::string> Save(const JobPosition& position);

  // The newest checkpoint that fully verifies; each newer one that does
  // not is logged, named in *rejected (optional) and, when complete, set
  // aside (CheckpointDir::SetAside) so it neither counts among the kept
  // ones nor blocks a new checkpoint at its step. NotFound when none.
  absl::StatusOr<ValidCheckpoint> Latest(
      std::vector<std::string>* rejected = nullptr) const;

  // The newest complete checkpoint's directory, if any (not verified).
  absl::StatusOr<std::optional<std::string>> NewestComplete() const;

  // Every parameter server loads the shards it now holds from `checkpoint`,
  // re-sharding when the checkpoint was written by a different number of
  // servers or with a different split. The shards must exist
  // (CreateShards) first.
  absl::Status Restore(const ValidCheckpoint& checkpoint);

 private:
  // Save without the clean-up of a failure.
  absl::StatusOr<std::string> SaveInto(const JobPosition& position);
  // Every server's shards (and the replica's) saved into `directory`; the
  // servers' answers, the replica's last. FailedPrecondition for a server
  // that saved fewer shards than this job put on it.
  absl::StatusOr<std::vector<SaveShardsResponse>> SaveShards(
      const std::string& directory, const JobPosition& position);

  CheckpointDir dir_;
  const int keep_;
  const std::vector<PsClient*> ps_;
  const JobConfig job_;
  std::vector<int64_t> expected_shards_;  // per server; empty: unchecked
  ReplicaCheckpoints* replicas_ = nullptr;
};

// The position a checkpoint records.
JobPosition PositionOf(const CheckpointManifest& manifest);

// Adds what the servers (and a replica) wrote, `saved`, to `manifest`:
// their files, each variable whole with its shards in order and the job's
// partitioner, and the job with its optimizer.
void AddSavedFiles(const std::vector<SaveShardsResponse>& saved,
                   const JobConfig& job, CheckpointManifest* manifest);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_JOB_CHECKPOINTER_H_
