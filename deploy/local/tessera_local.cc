// tessera_local runs a whole Tessera cluster on this machine: parameter
// servers, workers and the coordinator, wired together through TF_CONFIG on
// free 127.0.0.1 ports, with every process's output in <run_dir>/<name>.log.
//
//   tessera_local --num_ps=2 --num_workers=4 -- --epochs=10
//
// Launcher flags are listed below; every other argument (and everything after
// "--") is passed to the coordinator, followed by --run_dir=<run_dir>. Flags
// the launcher itself knows (its own, glog's, gflags') must come after "--"
// to reach the coordinator instead. A flag before "--" that neither knows
// (a typo: --num_workerz) is refused before anything starts, named as
// unknown to both. Children get TF_CONFIG and, unless the
// environment already sets GLOG_logtostderr or GLOG_log_dir,
// GLOG_logtostderr=1 so that their glog output lands in their log files. The
// coordinator's log is echoed to stdout as it grows.
//
// Each run gets its own job token (common/rpc/rpc_auth.h) in
// <run_dir>/job.token, readable by the user only, and every process gets
// --job_token_file naming it, so only this job's processes can call each other
// (a --job_token_file given to the launcher is used instead). --tls_cert,
// --tls_key, --tls_ca (and --tls_target_name_override) given to the launcher
// are checked and passed to every process, so the whole job talks mutual TLS;
// the certificate must name 127.0.0.1 (or the override). The coordinator also
// gets
// --checkpoint_dir=<run_dir>/checkpoints. Every process's pid is kept in
// <run_dir>/pids/<type>-<index> (pids/ps-1, pids/worker-0, pids/chief-0),
// rewritten when it is restarted.
//
// Restarts: a process that dies while the job runs (killed by a signal, or a
// non-zero exit other than 2, the binaries' code for a bad configuration) is
// started again with the same command line at the same address, up to
// --max_restarts times per process; its log gets a line "=== restart 1
// after signal 9 ===" and carries on. Nothing is restarted once a process
// has exited cleanly before the coordinator: the coordinator is then
// shutting the cluster down. A restarted coordinator resumes from
// its newest checkpoint; a restarted parameter server is restored by the
// coordinator. RestartPolicy (deploy/local/restart_policy.h) has the rule.
//
// Elastic jobs (docs/operations.md, "Growing and shrinking a job"): with
// --elastic a worker that drains (exits 0) or dies with no restart left
// does not end the job, and the coordinator removes a worker that does not
// come back (--remove_lost_workers; in mirrored and hybrid jobs it leaves
// the all-reduce ring). `tessera_local --join=RUN_DIR --num_workers=N`
// starts N more workers that join the job running in RUN_DIR
// (deploy/local/join_launcher.h) and waits for them; a job that no longer
// runs is refused at once.
//
// Exit status (common/exit_code.h, docs/exit_codes.md): 0 when the
// coordinator succeeds; 3 when an operator stopped the job
// before its epochs were all trained (tessera_ctl stop); 2 for a mistake in the
// launcher's flags or paths, or when the coordinator or another process exited
// 2 (a bad job, a data file that is not there); 1 when the coordinator fails
// otherwise, when a parameter server or worker dies before it finishes and
// cannot be restarted (no restarts left), or when the cluster cannot be
// started; 130 when interrupted by SIGINT, SIGTERM or SIGHUP. In every case all
// started processes are stopped before the launcher exits.

#include <signal.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/command_line.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/exit_code.h"
#include "common/process/security_flags.h"
#include "deploy/local/join_launcher.h"
#include "deploy/local/launcher.h"
#include "deploy/local/signal_watcher.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_int32(num_ps, 2,
             "Number of parameter servers to start (0: mirrored training).");
DEFINE_int32(num_workers, 2, "Number of workers to start.");
DEFINE_string(data_plane, "",
              "Passed to every worker as --data_plane (grpc or tcp: how "
              "dense tensors travel to the parameter servers); empty: the "
              "workers' default.");
DEFINE_string(row_memory_budget, "",
              "Passed to every parameter server as --row_memory_budget (e.g. "
              "512M: rows beyond it go to a disk tier); empty: every row in "
              "memory.");
DEFINE_bool(evaluator, false,
            "Also start the evaluator task (worker/evaluate/"
            "tessera_evaluator): it evaluates each new checkpoint on the test "
            "set, writing <run_dir>/eval.jsonl and tensorboard/eval. It never "
            "holds training up: its exit or failure is reported, not fatal, "
            "and it is stopped with the others once the coordinator is done "
            "(after --grace_period_s).");
DEFINE_string(run_dir, "",
              "Folder for cluster.json, the process logs and the "
              "coordinator's metrics; created with its parents. Default: "
              "runs/<YYYYmmdd-HHMMSS> under the current directory.");
DEFINE_string(bin_dir, "",
              "Build root holding ps_server/tessera_ps, worker/tessera_worker "
              "and coordinator/tessera_coordinator, or a bundle's bin/ "
              "folder holding them all. Default: the bin/ folder this binary "
              "is in, or the build root it lives in "
              "(<build>/deploy/local/tessera_local).");
DEFINE_int32(grace_period_s, 15,
             "Seconds processes get to exit by themselves after the "
             "coordinator finishes, and to exit after SIGTERM before they are "
             "sent SIGKILL.");
DEFINE_bool(elastic, false,
            "Workers may leave the job: one that exits cleanly (tessera_ctl "
            "drain) or dies with no restart left does not end it, and the "
            "coordinator gets --remove_lost_workers. Add workers with "
            "--join.");
DEFINE_string(join, "",
              "The run folder of a running job: start --num_workers more "
              "workers that join it (tessera_worker --join), instead of a "
              "new job, and wait until they exit.");
DEFINE_int32(max_restarts, 3,
             "Times each parameter server, worker and the coordinator is "
             "restarted when it dies while the job runs (0: never; the first "
             "death then stops the job).");

namespace tessera {
namespace {

// True if `arg` ("--name", "-name=value", "--noname") names a flag defined in
// this binary. Sets `*separate_value` when the flag's value is the next
// argument ("--num_ps 3").
bool IsLauncherFlag(absl::string_view arg, bool* separate_value) {
  *separate_value = false;
  if (arg.size() < 2 || arg[0] != '-') return false;
  absl::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
  const size_t eq = body.find('=');
  const std::string name(body.substr(0, eq));
  if (name.empty()) return false;
  gflags::CommandLineFlagInfo info;
  if (gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
    *separate_value = eq == absl::string_view::npos && info.type != "bool";
    return true;
  }
  return eq == absl::string_view::npos && absl::StartsWith(name, "no") &&
         gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) &&
         info.type == "bool";
}

struct SplitArgs {
  std::vector<std::string> launcher;  // Starts with argv[0].
  std::vector<std::string> coordinator;
  // The coordinator's given before "--", among the launcher's own.
  std::vector<std::string> before_separator;
};

// gflags aborts on unknown flags, so the coordinator's flags are separated
// out before parsing rather than left for ParseCommandLineFlags to skip.
SplitArgs SplitCommandLine(int argc, char** argv) {
  SplitArgs split;
  split.launcher.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") {
      split.coordinator.insert(split.coordinator.end(), argv + i + 1,
                               argv + argc);
      break;
    }
    bool separate_value;
    if (IsLauncherFlag(arg, &separate_value)) {
      split.launcher.emplace_back(arg);
      if (separate_value && i + 1 < argc) split.launcher.push_back(argv[++i]);
    } else {
      split.coordinator.emplace_back(arg);
      split.before_separator.emplace_back(arg);
    }
  }
  return split;
}

LauncherOptions OptionsFromFlags() {
  LauncherOptions options;
  options.num_ps = FLAGS_num_ps;
  options.num_workers = FLAGS_num_workers;
  options.data_plane = FLAGS_data_plane;
  options.row_memory_budget = FLAGS_row_memory_budget;
  options.evaluator = FLAGS_evaluator;
  options.run_dir = FLAGS_run_dir;
  options.bin_dir = FLAGS_bin_dir;
  options.grace_period_s = FLAGS_grace_period_s;
  options.max_restarts = FLAGS_max_restarts;
  options.elastic = FLAGS_elastic;
  options.tls = {FLAGS_tls_cert, FLAGS_tls_key, FLAGS_tls_ca};
  options.tls_target_name_override = FLAGS_tls_target_name_override;
  options.job_token_file = FLAGS_job_token_file;
  return options;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  // A closed stdout pipe (tessera_local | head) must not kill the launcher
  // and, through PR_SET_PDEATHSIG, the whole cluster mid-run.
  signal(SIGPIPE, SIG_IGN);
  tessera::SplitArgs args = tessera::SplitCommandLine(argc, argv);

  FLAGS_logtostderr = true;
  gflags::SetUsageMessage(
      "Runs a local Tessera cluster.\n"
      "  tessera_local [launcher flags] [--] [coordinator flags]");
  std::vector<char*> launcher_argv;
  for (std::string& arg : args.launcher) launcher_argv.push_back(arg.data());
  launcher_argv.push_back(nullptr);
  int launcher_argc = static_cast<int>(args.launcher.size());
  char** launcher_argv_ptr = launcher_argv.data();
  tessera::ParseCommandLineOrExit(&launcher_argc, &launcher_argv_ptr);
  google::InitGoogleLogging(argv[0]);

  if (FLAGS_num_ps < 0 || FLAGS_num_workers < 1 || FLAGS_grace_period_s < 0 ||
      FLAGS_max_restarts < 0) {
    absl::FPrintF(stderr,
                  "tessera_local: need --num_ps >= 0, --num_workers >= 1, "
                  "--grace_period_s >= 0 and --max_restarts >= 0\n");
    return tessera::kExitUserError;
  }
  if (!FLAGS_data_plane.empty()) {
    if (absl::Status s = tessera::ParseDataPlaneKind(FLAGS_data_plane).status();
        !s.ok()) {
      absl::FPrintF(stderr, "tessera_local: %s\n", s.message());
      return tessera::kExitUserError;
    }
  }
  // The first thread of the process, so every later one (the coordinator
  // echo) inherits the blocked signal mask.
  tessera::SignalWatcher signals(FLAGS_grace_period_s);
  if (!FLAGS_join.empty()) {
    if (!args.coordinator.empty()) {
      absl::FPrintF(stderr,
                    "tessera_local --join: %s is no flag of tessera_local, "
                    "and coordinator flags mean nothing here (the job runs "
                    "already)\n",
                    args.coordinator.front());
      return tessera::kExitUserError;
    }
    tessera::JoinLauncher joiner(tessera::OptionsFromFlags(), FLAGS_join,
                                 &signals);
    return joiner.Run();
  }
  tessera::LauncherOptions options = tessera::OptionsFromFlags();
  options.flags_before_separator = std::move(args.before_separator);
  tessera::Launcher launcher(std::move(options), std::move(args.coordinator),
                             &signals);
  return launcher.Run();
}
