// Saving a parameter server's shards into a checkpoint, and filling them
// from one, onto the same or a different number of servers (issue #7).
//
// Each server writes one checkpoint file (common/checkpoint/checkpoint_file.h),
// "ps-<index>.shards" in the checkpoint's directory, with one entry per
// shard, named after the shard ("{variable}/part_{i}"):
//
//   dense shard:  "values"        float* the shard's shape
//                 "slot/<name>"   float  the same shape, per optimizer slot
//                 "version"       int64  [1]  updates applied
//                 "updates"       int64  [1]  the optimizer's t (Adam)
//   hash table:   "ids"           int64  [n]
//                 "values"        float* [n, dim]
//                 "slot/<name>"   float  [n, dim], per optimizer slot
//                 "step"          int64  [1]  the table's version and t
//                 and, when the table evicts rows:
//                 "steps_unseen"  int64  [n]  steps since last pull or push
//                 "pushes"        int32  [n]  pushes the row got
//                 "swept"         uint8  [n]  1 once it lived through a sweep
//
// * "values" keeps the precision the table stores (ShardDef.precision):
// float32, or float16/bfloat16 for an fp16/bf16 table, its 2-byte values
// bit for bit, so a narrow table's checkpoint is as small as the table.
// The array's dtype in the entry's header records the precision; files
// written before narrow tables were kept narrow hold float32 and restore
// as always. Slots are float32 whatever the precision (a row-wise slot is
// [n, 1]).
//
// Slot names are the optimizer's (Optimizer::slot_name). The coordinator
// lists the shards, slots and files in the manifest (proto/checkpoint.proto)
// from each server's SaveShardsResponse.
//
// Restoring fills every shard a server holds now, whatever the layout and
// the precisions at save time: saved values are widened to fp32 (exact)
// and rounded to nearest into the shard's precision, so a table restored
// in the precision it was saved in gets its bits back, an fp32 checkpoint
// fills an fp16 table rounded to nearest, and an fp16 one an fp32 table
// exactly. The offline readers (RestoreVariables: tessera_predict, the
// evaluator, the ONNX and Keras exporters) restore into fp32 shards and so
// see every checkpoint widened. Beyond that: a dense shard takes the rows of
// each saved shard of its variable whose row range overlaps its own, a
// hash-table shard every saved id of its variable that HashShardOf(id, its
// num_shards) routes to it. A dense shard's version and update count are the
// largest of the saved shards it draws from (all equal when the layout did not
// change), a hash table's step likewise, and a row's steps_unseen is kept
// relative to it.
#ifndef TESSERA_PS_SERVER_SHARD_CHECKPOINT_H_
#define TESSERA_PS_SERVER_SHARD_CHECKPOINT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint/checkpoint_file.h"
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

// The dtype of the "values" array of a table stored in `precision`, and
// back (InvalidArgument for a dtype that is not a float).
CheckpointDtype CheckpointValuesDtype(RowPrecision precision);
absl::StatusOr<RowPrecision> RowPrecisionOfValues(CheckpointDtype dtype);

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
