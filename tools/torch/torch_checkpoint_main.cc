// tessera_torch_checkpoint: a job's variables from a safetensors state_dict
// written as the step-0 checkpoint that tessera_coordinator
// --init_checkpoint starts from, with no cluster (what `python3 -m
// tessera_torch import --checkpoint_out` runs, as `tessera_keras import
// --checkpoint_out` writes one):
//
//   tessera_torch_checkpoint --job_file=job.textproto
//       --init_weights=init.safetensors --checkpoint_out=DIR
//
// Exit codes as every tool's: 2 for a bad flag, job or file (the error
// names the tensor or variable), 1 for what a retry might fix.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/exit_code.h"
#include "common/job_file.h"
#include "gflags/gflags.h"
#include "tools/torch/init_weights.h"

DEFINE_string(job_file, "", "The job (text-format JobConfig).");
DEFINE_string(init_weights, "",
              "The safetensors file: a PyTorch state_dict or tensors named "
              "as the variables.");
DEFINE_string(checkpoint_out, "",
              "The checkpoint root to write (its contents are replaced).");

namespace tessera {
namespace {

int Fail(const absl::Status& status) {
  return ExitWith("tessera_torch_checkpoint", status);
}

int Run() {
  if (FLAGS_job_file.empty() || FLAGS_init_weights.empty() ||
      FLAGS_checkpoint_out.empty()) {
    return Fail(absl::InvalidArgumentError(
        "--job_file, --init_weights and --checkpoint_out are required"));
  }
  absl::StatusOr<JobConfig> job = ReadJobFile(FLAGS_job_file);
  if (!job.ok()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--job_file: ", job.status().message())));
  }
  absl::StatusOr<std::vector<VariableValues>> values =
      ReadInitWeights(*job, FLAGS_init_weights);
  if (!values.ok()) {
    return Fail(absl::InvalidArgumentError(values.status().message()));
  }
  absl::StatusOr<std::string> written =
      WriteInitWeightsCheckpoint(*job, *values, FLAGS_checkpoint_out);
  if (!written.ok()) return Fail(written.status());
  std::printf("tessera_torch_checkpoint: wrote %s (%zu variables)\n",
              written->c_str(), values->size());
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Writes a safetensors state_dict as a job's step-0 checkpoint");
  tessera::ParseCommandLineOrExit(&argc, &argv);
  return tessera::Run();
}
