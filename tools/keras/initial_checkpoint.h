// A job's variables with given values, written as a checkpoint at step 0
// that a job starts from (tessera_coordinator --init_checkpoint): the
// values a Keras model was saved with, trained further by Tessera. The
// restore re-shards it onto any number of parameter servers.
#ifndef TESSERA_TOOLS_KERAS_INITIAL_CHECKPOINT_H_
#define TESSERA_TOOLS_KERAS_INITIAL_CHECKPOINT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "tools/keras/keras_archive.h"

namespace tessera {

// Writes every variable of `job`'s model under checkpoint root `root` as
// one parameter server's checkpoint at step 0, epoch 1 (nothing trained):
// the values of `values` (by variable name; each must have the variable's
// shape), fresh optimizer slots. Returns the checkpoint's folder.
// InvalidArgument names a variable without a value or of another shape.
absl::StatusOr<std::string> WriteInitialCheckpoint(
    const JobConfig& job,
    const std::vector<std::pair<std::string, KerasArray>>& values,
    const std::string& root);

}  // namespace tessera

#endif  // TESSERA_TOOLS_KERAS_INITIAL_CHECKPOINT_H_
