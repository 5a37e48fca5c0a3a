// The evaluator task beside a training job (tools/evaluate/
// checkpoint_evaluator.h): evaluates each new checkpoint in
// --checkpoint_dir on the job's test set, writing <run_dir>/eval.jsonl and
// TensorBoard scalars under <run_dir>/tensorboard/eval, and exits once the
// job's final checkpoint is evaluated (or on SIGTERM/SIGINT, after the
// evaluation in progress). It runs at a lower CPU priority (--nice) so it
// takes what training leaves. tessera_local --evaluator starts one.
//
//   build/worker/evaluate/tessera_evaluator
//       --checkpoint_dir=RUN/checkpoints --run_dir=RUN
//
// Exit codes as every tool's (common/exit_code.h): 2 for a mistake in the
// command line or its paths (an empty --checkpoint_dir, one whose parent
// folder does not exist, a test set that is not there), 1 for a failure a
// retry might fix.

#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/exit_code.h"
#include "common/shutdown_signal.h"
#include "gflags/gflags.h"
#include "tools/evaluate/checkpoint_evaluator.h"
#include "worker/backend/cpu/cpu_backend.h"

DEFINE_string(checkpoint_dir, "", "The training job's checkpoint root.");
DEFINE_string(run_dir, "",
              "Where eval.jsonl and tensorboard/eval go (default: the "
              "checkpoint root's parent folder).");
DEFINE_string(data_dir, "",
              "Read the test set from this folder instead of the job's.");
DEFINE_int64(max_examples, -1,
             "Evaluate only the first N test examples (N >= 1; -1: all).");
DEFINE_int32(batch_size, 1024, "Examples per forward pass.");
DEFINE_double(poll_seconds, 2, "How often to look for a new checkpoint.");
DEFINE_double(max_idle_seconds, 0,
              "Stop after this long without a new checkpoint (0: wait for "
              "the job's final checkpoint).");
DEFINE_int32(nice, 10, "CPU priority increment, so training comes first.");

namespace tessera {
namespace {

int Fail(const absl::Status& status) {
  return ExitWith("tessera_evaluator", status);
}

int Run() {
  if (FLAGS_checkpoint_dir.empty()) {
    return Fail(absl::InvalidArgumentError(
        "--checkpoint_dir is required (the training job's checkpoint root)"));
  }
  if (FLAGS_batch_size < 1 || !(FLAGS_poll_seconds > 0) ||
      !(FLAGS_max_idle_seconds >= 0)) {
    return Fail(absl::InvalidArgumentError(
        "--batch_size and --poll_seconds must be positive, "
        "--max_idle_seconds not negative"));
  }
  if (FLAGS_max_examples < 1 && FLAGS_max_examples != -1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--max_examples must be a number of examples >= 1 (or "
                     "-1: all of them), got ",
                     FLAGS_max_examples)));
  }
  if (FLAGS_nice > 0) setpriority(PRIO_PROCESS, 0, FLAGS_nice);
  InstallShutdownSignals();
  EvaluatorOptions options;
  options.checkpoint_root = FLAGS_checkpoint_dir;
  options.run_dir = FLAGS_run_dir;
  if (options.run_dir.empty()) {
    const std::filesystem::path root =
        std::filesystem::path(FLAGS_checkpoint_dir).lexically_normal();
    // "run/checkpoints/" normalizes to "run/checkpoints/": drop the slash.
    const std::filesystem::path folder =
        root.has_filename() ? root : root.parent_path();
    options.run_dir = folder.has_parent_path() ? folder.parent_path().string()
                                               : std::string(".");
  }
  options.data_dir = FLAGS_data_dir;
  options.max_examples = FLAGS_max_examples;
  options.batch = FLAGS_batch_size;
  options.poll = absl::Seconds(FLAGS_poll_seconds);
  options.max_idle = absl::Seconds(FLAGS_max_idle_seconds);
  CpuBackend cpu;
  CheckpointEvaluator evaluator(options, &cpu);
  absl::Status s = evaluator.Run([] { return ShutdownSignalled(); },
                                 [](const std::string& line) {
                                   std::printf("%s\n", line.c_str());
                                   std::fflush(stdout);
                                 });
  if (!s.ok()) return Fail(s);
  std::printf("tessera_evaluator: %lld checkpoints evaluated\n",
              static_cast<long long>(evaluator.evaluated()));
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Evaluates each new checkpoint of a training job on its test set");
  tessera::ParseCommandLineOrExit(&argc, &argv);
  return tessera::Run();
}
