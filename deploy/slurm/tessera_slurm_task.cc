// tessera_slurm_task: the one program srun starts on every task of a Slurm
// job step. It resolves the step into a cluster exactly as the binaries do
// with --slurm_jobs (common/process/cluster_flags.h,
// common/cluster/slurm_cluster_resolver.h: roles take ranks in name order, so
// rank 0 is the chief), sets TF_CONFIG and, when the resolver hands the task
// its GPUs, CUDA_VISIBLE_DEVICES, and replaces itself (execv) with the binary
// of its role:
//
//   srun tessera_slurm_task --slurm_jobs=chief:1,ps:2,worker:4 -- --epochs=10
//
//   chief  -> tessera_coordinator, with the arguments after "--";
//   ps     -> tessera_ps;
//   worker -> tessera_worker;
//   evaluator -> tessera_evaluator, watching the
//             --checkpoint_dir (and writing into the --run_dir) of the
//             arguments after "--", which must name a checkpoint folder
//             every node shares.
// Each but the evaluator gets --listen_host when it is given here
// (--listen_host=cluster when several fake nodes share one machine), and
// --job_token_file when it is given here (the sbatch scripts write one token
// per job). The binary reads its cluster from TF_CONFIG, so it needs none of
// the Slurm flags.
//
// With srun --multi-prog, the binaries can instead be started directly with
// --slurm_jobs (deploy/slurm/train_multiprog.sbatch); this program is for
// the plain "srun <one program>" launch.
//
// --print_cluster prints the TF_CONFIG JSON, the task with its address and
// CUDA_VISIBLE_DEVICES (as every binary prints them), then
//   rank=<SLURM_PROCID> node=<SLURMD_NODENAME> exec=<binary> <arguments>
// and exits 0 without running anything; srun --label keeps ranks apart.
//
// Exit status: that of the binary it becomes; 2, with the rank in the
// message, when the cluster cannot be resolved or the binary cannot be run.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/cluster/cluster_spec.h"
#include "common/command_line.h"
#include "common/process/cluster_flags.h"
#include "common/process/process_start.h"   // Declares --listen_host.
#include "common/process/security_flags.h"  // Declares --job_token_file.
#include "deploy/build_root.h"
#include "gflags/gflags.h"

DEFINE_string(bin_dir, "",
              "Build root holding coordinator/tessera_coordinator, "
              "ps_server/tessera_ps and worker/tessera_worker, or a bundle's "
              "bin/ folder holding them all. Default: the bin/ folder this "
              "binary is in, or the build root it lives in "
              "(<build>/deploy/slurm/tessera_slurm_task).");

namespace tessera {
namespace {

constexpr int kExitError = 2;

std::string EnvOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

int Fail(const absl::Status& status) {
  std::fflush(stdout);
  std::fprintf(stderr, "tessera_slurm_task[rank %s]: %s\n",
               EnvOr("SLURM_PROCID", "?").c_str(), status.ToString().c_str());
  return kExitError;
}

absl::StatusOr<std::string> BinDir() {
  if (!FLAGS_bin_dir.empty()) return FLAGS_bin_dir;
  return BuildRootOfThisLauncher();
}

// The binary that runs tasks of `type` (found with BinaryUnder).
absl::StatusOr<std::string> BinaryFor(absl::string_view type) {
  if (type == "chief") return "tessera_coordinator";
  if (type == "ps") return "tessera_ps";
  if (type == "worker") return "tessera_worker";
  if (type == "evaluator") return "tessera_evaluator";
  return absl::InvalidArgumentError(absl::StrCat(
      "no Tessera binary runs tasks of type \"", type,
      "\"; --slurm_jobs may name chief, ps, worker and evaluator"));
}

// The value of --<name>=... (or -<name>=...) among the coordinator's
// arguments, the last one winning as it does there; "" if absent.
std::string CoordinatorFlag(const std::vector<std::string>& args,
                            absl::string_view name) {
  std::string value;
  for (const std::string& arg : args) {
    for (const std::string& prefix :
         {absl::StrCat("--", name, "="), absl::StrCat("-", name, "=")}) {
      if (absl::StartsWith(arg, prefix)) value = arg.substr(prefix.size());
    }
  }
  return value;
}

// The cluster from Slurm, by the same code path as every binary's
// --slurm_jobs (which also sets CUDA_VISIBLE_DEVICES for this task).
absl::StatusOr<ClusterSpec> ResolveFromSlurm() {
  if (FLAGS_slurm_jobs.empty()) {
    return absl::InvalidArgumentError(
        "--slurm_jobs is required, e.g. --slurm_jobs=chief:1,ps:2,worker:4");
  }
  if (!FLAGS_tf_config.empty() || !FLAGS_chief_host.empty() ||
      !FLAGS_ps_hosts.empty() || !FLAGS_worker_hosts.empty()) {
    return absl::InvalidArgumentError(
        "tessera_slurm_task takes the cluster from Slurm (--slurm_jobs) "
        "only; run the binaries directly with --tf_config or --*_hosts");
  }
  absl::StatusOr<ClusterSpec> cluster = ResolveClusterSpec();
  if (!cluster.ok()) return cluster.status();
  if (absl::Status s = cluster->ValidateForParameterServerTraining(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slurm_jobs=", FLAGS_slurm_jobs, ": ", s.message()));
  }
  return cluster;
}

// The command line (binary first) this task runs.
absl::StatusOr<std::vector<std::string>> CommandLine(
    const ClusterSpec& cluster, const std::vector<std::string>& chief_args) {
  absl::StatusOr<std::string> name = BinaryFor(cluster.task().type);
  if (!name.ok()) return name.status();
  absl::StatusOr<std::string> bin_dir = BinDir();
  if (!bin_dir.ok()) return bin_dir.status();
  std::vector<std::string> line = {BinaryUnder(*bin_dir, *name)};
  if (cluster.task().type == "evaluator") {
    // It talks to no task: it reads the checkpoints the coordinator writes.
    const std::string checkpoints =
        CoordinatorFlag(chief_args, "checkpoint_dir");
    if (checkpoints.empty()) {
      return absl::InvalidArgumentError(
          "an evaluator task needs the coordinator's --checkpoint_dir (after "
          "\"--\"), a folder every node shares");
    }
    line.push_back(absl::StrCat("--checkpoint_dir=", checkpoints));
    const std::string run_dir = CoordinatorFlag(chief_args, "run_dir");
    if (!run_dir.empty()) line.push_back(absl::StrCat("--run_dir=", run_dir));
    return line;
  }
  if (!gflags::GetCommandLineFlagInfoOrDie("listen_host").is_default) {
    line.push_back(absl::StrCat("--listen_host=", FLAGS_listen_host));
  }
  if (!FLAGS_job_token_file.empty()) {
    line.push_back(absl::StrCat("--job_token_file=", FLAGS_job_token_file));
  }
  if (cluster.task().type == "chief") {
    line.insert(line.end(), chief_args.begin(), chief_args.end());
  }
  return line;
}

std::string Where() {
  return absl::StrCat("rank=", EnvOr("SLURM_PROCID", "?"),
                      " node=", EnvOr("SLURMD_NODENAME", "?"));
}

absl::Status Exec(const ClusterSpec& cluster,
                  const std::vector<std::string>& line) {
  if (setenv("TF_CONFIG", cluster.ToTfConfigJson().c_str(), 1) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot set TF_CONFIG: ", std::strerror(errno)));
  }
  // Heads the task's log: which task this is and what it became.
  std::fprintf(stderr,
               "tessera_slurm_task: %s task=%s:%d address=%s "
               "CUDA_VISIBLE_DEVICES=%s: %s\n",
               Where().c_str(), cluster.task().type.c_str(),
               cluster.task().index, cluster.own_address().c_str(),
               EnvOr("CUDA_VISIBLE_DEVICES", "(unset)").c_str(),
               absl::StrJoin(line, " ").c_str());
  std::fflush(nullptr);
  std::vector<char*> argv;
  for (const std::string& arg : line) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  return absl::NotFoundError(absl::StrCat(
      "cannot run ", line[0], ": ", std::strerror(errno),
      "; build it (deploy/build.sh) or point --bin_dir at the build root (or "
      "a bundle's bin/)"));
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  // Arguments after "--" belong to the coordinator; gflags never sees them,
  // so coordinator flags need not be known here.
  std::vector<char*> own(argv, argv + argc);
  std::vector<std::string> chief_args;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      own.assign(argv, argv + i);
      chief_args.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  own.push_back(nullptr);
  int own_argc = static_cast<int>(own.size()) - 1;
  char** own_argv = own.data();
  gflags::SetUsageMessage(
      "Runs the Tessera binary of this Slurm task's role (srun starts it on "
      "every task).\n  srun tessera_slurm_task "
      "--slurm_jobs=chief:1,ps:2,worker:4 [flags] [-- coordinator flags]");
  tessera::ParseCommandLineOrExit(&own_argc, &own_argv);
  if (own_argc > 1) {
    return tessera::Fail(absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", own_argv[1],
                     "\"; coordinator flags go after \"--\"")));
  }

  absl::StatusOr<tessera::ClusterSpec> cluster = tessera::ResolveFromSlurm();
  if (!cluster.ok()) return tessera::Fail(cluster.status());
  absl::StatusOr<std::vector<std::string>> line =
      tessera::CommandLine(*cluster, chief_args);
  if (!line.ok()) return tessera::Fail(line.status());
  if (tessera::PrintClusterIfRequested(*cluster)) {
    std::printf("%s exec=%s\n", tessera::Where().c_str(),
                absl::StrJoin(*line, " ").c_str());
    return 0;
  }
  return tessera::Fail(tessera::Exec(*cluster, *line));
}
