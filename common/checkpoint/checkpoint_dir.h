// The checkpoints of a job under one root directory:
//
//   <root>/ckpt-0000000120/ps-0.shards   written by parameter server 0
//   <root>/ckpt-0000000120/ps-1.shards   written by parameter server 1
//   <root>/ckpt-0000000120/manifest      written last, by the coordinator
//
// Every file is a checkpoint file (common/checkpoint/checkpoint_file.h), so it
// is written under a temporary name, fsynced and renamed into place. The
// manifest holds one entry, "manifest", whose single uint8 array "proto" is
// a serialized CheckpointManifest (proto/checkpoint.proto) recording each
// other file's size and CRC. A checkpoint is complete once its manifest
// exists and verifies; it is valid once, in addition, every file the
// manifest names verifies and matches the recorded size and CRC.
//
// Protocol: the coordinator calls Prepare(step); each parameter server
// writes its file into the directory and reports the file's summary; the
// coordinator calls Commit() with the manifest, then KeepLast(k), so older
// checkpoints go only once the new one is complete. A crash at any point
// leaves either no manifest (the checkpoint is ignored) or a complete one;
// temporary files of a crashed writer are never read.
//
// Thread safety: a CheckpointDir holds only its root; its methods may run
// concurrently, but two processes must not Commit or KeepLast the same root
// at once (the coordinator is the only one that does).
#ifndef TESSERA_COMMON_CHECKPOINT_DIR_H_
#define TESSERA_COMMON_CHECKPOINT_DIR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint/checkpoint_file.h"
#include "proto/checkpoint.pb.h"

namespace tessera {

inline constexpr char kCheckpointManifestName[] = "manifest";

// "ckpt-0000000120": the step zero-padded to 10 digits (more if it needs).
std::string CheckpointDirName(int64_t step);
// Parses a name CheckpointDirName() makes; false for anything else
// (temporary files, other padding, stray names).
bool ParseCheckpointDirName(absl::string_view name, int64_t* step);
// "ps-1.shards": the file parameter server `ps_index` writes.
std::string PsCheckpointFileName(int ps_index);
// The file of a mirrored or hybrid job's replica: the variables every
// worker keeps whole, saved once, in a server's format, by one worker.
// Its CheckpointFile and shards carry kReplicaCheckpointPs.
inline constexpr char kReplicaCheckpointFileName[] = "replica.shards";
inline constexpr int kReplicaCheckpointPs = -1;

// Writes `manifest` as a checkpoint file at `path` (temporary name, fsync,
// rename). Reads it back: DataLoss if the file or the message is damaged.
absl::Status WriteManifestFile(const std::string& path,
                               const CheckpointManifest& manifest);
absl::StatusOr<CheckpointManifest> ReadManifestFile(const std::string& path);

// A checkpoint directory found under the root.
struct CheckpointRef {
  int64_t step = 0;
  std::string path;  // <root>/ckpt-<step>
  bool has_manifest = false;
};

struct ValidCheckpoint {
  int64_t step = 0;
  std::string path;
  CheckpointManifest manifest;
};

class CheckpointDir {
 public:
  explicit CheckpointDir(std::string root);

  const std::string& root() const { return root_; }
  // <root>/ckpt-<step>; nothing is created.
  std::string PathFor(int64_t step) const;

  // Creates the root (if missing) and the directory of checkpoint `step`,
  // and returns the latter. Calling it again for an incomplete checkpoint is
  // fine (a retried checkpoint rewrites its files); AlreadyExists when the
  // checkpoint already has a manifest, so a complete checkpoint is never
  // overwritten file by file.
  absl::StatusOr<std::string> Prepare(int64_t step) const;

  // Every checkpoint directory under the root, newest (highest step) first.
  // Other names are ignored. An absent root is an empty list.
  absl::StatusOr<std::vector<CheckpointRef>> List() const;

  // Completes checkpoint manifest.global_step() by writing its manifest,
  // after checking that every file it lists exists with the recorded size
  // (FailedPrecondition naming the file otherwise; nothing is written).
  absl::Status Commit(const CheckpointManifest& manifest) const;

  // Reads and fully verifies a checkpoint: the manifest, its global_step
  // against the directory name, and every listed file (every CRC, and size
  // and whole-file CRC against the manifest). Reads every byte of the
  // checkpoint. DataLoss (or NotFound for a missing file) naming the
  // checkpoint, file and what is wrong.
  absl::StatusOr<CheckpointManifest> Validate(const CheckpointRef& ref) const;

  // The newest checkpoint that validates. Each newer one rejected is logged
  // as a warning with the reason, and appended to *rejected when it is not
  // null. NotFound when no checkpoint validates.
  absl::StatusOr<ValidCheckpoint> LatestValid(
      std::vector<std::string>* rejected = nullptr) const;

  // Keeps the newest `keep` complete checkpoints (those with a manifest that
  // verifies) and deletes every checkpoint older than the oldest kept one,
  // plus incomplete ones older than the newest complete one (abandoned
  // attempts). Incomplete checkpoints newer than every complete one are kept:
  // one may be in progress. A manifest is deleted before the rest of its
  // directory, so a deletion cut short leaves an incomplete checkpoint.
  // Checks manifests only, not every file (that is LatestValid's job), so it
  // stays cheap. InvalidArgument for keep < 1.
  absl::Status KeepLast(int keep) const;

  // Renames checkpoint `ref` to <path>.rejected (or .rejected-2, ...), a
  // name List() ignores, and returns the new path. A complete checkpoint
  // that does not validate would otherwise count as one of the kept ones
  // and block a new checkpoint at its step; renamed, it stays for a person
  // to look at.
  absl::StatusOr<std::string> SetAside(const CheckpointRef& ref) const;

 private:
  const std::string root_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_CHECKPOINT_DIR_H_
