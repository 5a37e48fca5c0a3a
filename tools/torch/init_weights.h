// A job warm-started from a PyTorch state_dict in a safetensors file
// (tessera_coordinator --init_weights): the file read and checked against
// the job's model (tools/torch/state_dict.h names the keys and layouts),
// then written as the step-0 checkpoint that --init_checkpoint restores,
// re-sharded onto any number of parameter servers.
//
// Thread-safe; no state.
#ifndef TESSERA_TOOLS_TORCH_INIT_WEIGHTS_H_
#define TESSERA_TOOLS_TORCH_INIT_WEIGHTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "tools/torch/state_dict.h"

namespace tessera {

// The values of every variable of `job`'s model from the safetensors file
// at `path`. InvalidArgument, its message starting with the path, for a
// file that is not one, a missing, misshapen or extra tensor.
absl::StatusOr<std::vector<VariableValues>> ReadInitWeights(
    const JobConfig& job, const std::string& path);

// The folder beside `path` that WriteInitWeightsCheckpoint writes to:
// "<path>.checkpoint", on the file system the parameter servers read the
// file's folder from.
std::string InitWeightsCheckpointRoot(const std::string& path);

// Writes `values` as one parameter server's checkpoint at step 0 under
// `root`, replacing whatever `root` held (it is the weights' own folder,
// made again for each job). Returns the checkpoint's folder.
absl::StatusOr<std::string> WriteInitWeightsCheckpoint(
    const JobConfig& job, const std::vector<VariableValues>& values,
    const std::string& root);

}  // namespace tessera

#endif  // TESSERA_TOOLS_TORCH_INIT_WEIGHTS_H_
