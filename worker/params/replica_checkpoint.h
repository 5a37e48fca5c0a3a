// A mirrored or hybrid job's replica in its checkpoints: the dense
// variables and replicated tables every worker keeps whole.
//
// One worker saves them, beside the servers' shard files, in a server's
// format (ps_server/shard_checkpoint.h: values, optimizer slots, update
// count), each variable one whole shard, in kReplicaCheckpointFileName.
// So anything that reads a checkpoint reads a replica's variables as it
// reads a server's: a restore onto any number of servers (an async job
// resuming a hybrid one), tessera_export, tessera_predict. Restoring
// reads each variable wherever it was saved, re-assembled from however
// many shards, so a replica also starts from an async job's checkpoint.
#ifndef TESSERA_WORKER_PARAMS_REPLICA_CHECKPOINT_H_
#define TESSERA_WORKER_PARAMS_REPLICA_CHECKPOINT_H_

#include <string>

#include "absl/status/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/ps_service.pb.h"
#include "worker/params/mirrored_parameters.h"

namespace tessera {

// Writes `replica` into <directory>/kReplicaCheckpointFileName; `response`
// lists the file and the variables for the manifest. Errors name the
// file; a failed save leaves no file.
absl::Status SaveReplica(const MirroredParameters& replica,
                         const std::string& directory,
                         SaveShardsResponse* response);

// Fills `replica` (values, slots, update count) from the checkpoint that
// `manifest` describes in `directory`. All or nothing. The errors of a
// server's restore: NotFound for a variable the checkpoint lacks,
// FailedPrecondition for a shape or optimizer slots that differ, DataLoss
// for a damaged file, each naming the variable and file.
absl::Status RestoreReplica(const CheckpointManifest& manifest,
                            const std::string& directory,
                            MirroredParameters* replica);

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_REPLICA_CHECKPOINT_H_
