// Saving a parameter server's shards into a checkpoint, and filling them
// from one, onto the same or a different number of servers (issue #7).
//
// Each server writes one checkpoint file (common/checkpoint/checkpoint_file.h),
// "ps-<index>.shards" in the checkpoint's directory, with one entry per
// shard, named after the shard ("{variable}/part_{i}"):
//
//   dense shard:  "values"        float  the shard's shape
//                 "slot/<name>"   float  the same shape, per optimizer slot
//                 "version"       int64  [1]  updates applied
//                 "updates"       int64  [1]  the optimizer's t (Adam)
//   hash table:   "ids"           int64  [n]
//                 "values"        float  [n, dim]
//                 "slot/<name>"   float  [n, dim], per optimizer slot
//                 "step"          int64  [1]  the table's version and t
//                 and, when the table evicts rows:
//                 "steps_unseen"  int64  [n]  steps since last pull or push
//                 "pushes"        int32  [n]  pushes the row got
//                 "swept"         uint8  [n]  1 once it lived through a sweep
//
// Slot names are the optimizer's (Optimizer::slot_name). The coordinator
// lists the shards, slots and files in the manifest (proto/checkpoint.proto)
// from each server's SaveShardsResponse.
//
// Restoring fills every shard a server holds now, whatever the layout at
// save time: a dense shard takes the rows of each saved shard of its
// variable whose row range overlaps its own, a hash-table shard every saved
// id of its variable that HashShardOf(id, its num_shards) routes to it. A
// dense shard's version and update count are the largest of the saved
// shards it draws from (all equal when the layout did not change), a hash
// table's step likewise, and a row's steps_unseen is kept relative to it.
#ifndef TESSERA_PS_SERVER_SHARD_CHECKPOINT_H_
#define TESSERA_PS_SERVER_SHARD_CHECKPOINT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/checkpoint.pb.h"
#include "proto/ps_service.pb.h"
#include "ps_server/shard_store.h"

namespace tessera {

// CheckpointVariable.kind.
inline constexpr char kDenseKind[] = "dense";
inline constexpr char kHashKind[] = "hash";

// Array keys of a shard's entry (see above).
inline constexpr char kCheckpointValuesKey[] = "values";
inline constexpr char kCheckpointVersionKey[] = "version";
inline constexpr char kCheckpointUpdatesKey[] = "updates";
inline constexpr char kCheckpointIdsKey[] = "ids";
inline constexpr char kCheckpointStepKey[] = "step";
inline constexpr char kCheckpointStepsUnseenKey[] = "steps_unseen";
inline constexpr char kCheckpointPushesKey[] = "pushes";
inline constexpr char kCheckpointSweptKey[] = "swept";

// The optimizer's slot names, in slot order, and a slot's array key
// ("slot/m").
std::vector<std::string> CheckpointSlotNames(const Optimizer& optimizer);
std::string CheckpointSlotKey(absl::string_view slot);

// Writes every shard of `store` into <directory>/PsCheckpointFileName(
// ps_index) (temporary name, fsync, rename), and fills `response` with the
// file's name, size and CRC and the variables it holds parts of. Each shard
// is written under its lock (Shard::VisitState, HashTable::VisitRows), so it
// is one consistent version; updates of that shard wait meanwhile. The
// directory must exist. Errors name the file; a failed save leaves no file.
absl::Status SaveShardCheckpoint(const ShardStore& store,
                                 const std::string& directory, int ps_index,
                                 SaveShardsResponse* response);
// The same into <directory>/<file_name>, its file and shards marked as
// saved by `saved_by` (kReplicaCheckpointPs: a worker's replica).
absl::Status SaveShardCheckpointAs(const ShardStore& store,
                                   const std::string& directory,
                                   const std::string& file_name, int saved_by,
                                   SaveShardsResponse* response);

// Fills every shard of `store` from the checkpoint in `directory` that
// `manifest` describes, re-sharding as the file comment says. Each file
// needed is read once, completely, and must match the size and CRC the
// manifest records. All shards change, or none: everything is read and
// checked into temporaries first, and swapped in only once every file
// verified. Memory: a second copy of this server's shards (values and
// slots) while it runs, plus one saved shard at a time. Errors:
//   NotFound            a shard's variable or a needed file is missing
//   FailedPrecondition  a variable differs from the checkpoint's: kind,
//                       dtype, shape, or optimizer slots ("checkpoint has
//                       no slot 'm' for variable ...")
//   DataLoss            a file is corrupt or truncated, does not match the
//                       manifest, lacks an entry, or the saved shards do
//                       not cover a dense shard's rows
//   InvalidArgument     the manifest names a file outside `directory`
// each naming the variable, file and entry concerned.
absl::Status RestoreShardCheckpoint(const CheckpointManifest& manifest,
                                    const std::string& directory,
                                    ShardStore* store,
                                    RestoreShardsResponse* response);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_SHARD_CHECKPOINT_H_
