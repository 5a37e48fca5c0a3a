// Launcher starts and supervises a whole Tessera cluster on this machine
// (parameter servers, workers, the coordinator and, if asked, the
// evaluator), wired together through TF_CONFIG on free 127.0.0.1 ports,
// with every process's output in <run_dir>/<name>.log; tessera_local.cc
// describes what the user sees.
//
// Contract: Run() is called once, on the thread that owns `signals`; it
// returns the launcher's exit code (common/exit_code.h) and has stopped
// every process it started by then.
#ifndef TESSERA_DEPLOY_LOCAL_LAUNCHER_H_
#define TESSERA_DEPLOY_LOCAL_LAUNCHER_H_

#include <sys/types.h>

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/rpc/tls_credentials.h"
#include "deploy/local/log_tail.h"
#include "deploy/local/process_group.h"
#include "deploy/local/restart_policy.h"
#include "deploy/local/signal_watcher.h"
#include "nlohmann/json.hpp"

namespace tessera {

// The launcher's flags (tessera_local.cc documents each).
struct LauncherOptions {
  int num_ps = 2;
  int num_workers = 2;
  std::string data_plane;         // Empty: the workers' default.
  std::string row_memory_budget;  // Empty: every row in memory.
  bool evaluator = false;
  std::string run_dir;  // Empty: runs/<timestamp>.
  std::string bin_dir;  // Empty: found from this binary's place.
  int grace_period_s = 15;
  int max_restarts = 3;
  // Workers come and go (docs/operations.md, "Growing and shrinking a
  // job"): a worker that exits cleanly (it drained) or dies with no
  // restart left does not end the job, whose coordinator gets
  // --remove_lost_workers; tessera_local --join=RUN_DIR adds workers.
  bool elastic = false;
  // The job's security, passed on to every process.
  TlsPaths tls;
  std::string tls_target_name_override;
  std::string job_token_file;  // Empty: a fresh token in the run folder.
  // The coordinator's flags given among the launcher's own, before "--":
  // one the coordinator does not know either is a typo of the user's,
  // named as unknown to both rather than blamed on the coordinator.
  std::vector<std::string> flags_before_separator;
};

// One process of the cluster.
struct ClusterMember {
  std::string name;  // ps-0, worker-1, chief: also the log file's stem.
  std::string type;  // TF_CONFIG task type.
  int index;
  std::string address;
  std::string binary;
  std::vector<std::string> args;

  // "ps 1", "worker 0", "coordinator": how messages name it.
  std::string Label() const {
    return type == "chief" ? "coordinator" : absl::StrCat(type, " ", index);
  }
};

class Launcher {
 public:
  // `coordinator_args` are passed to the coordinator after the launcher's
  // own (--run_dir, --checkpoint_dir), so the user's win.
  Launcher(LauncherOptions options, std::vector<std::string> coordinator_args,
           SignalWatcher* signals);

  int Run();

 private:
  absl::Status Prepare();
  // Makes the run folder, the job's token in it and its pids folder.
  absl::Status PrepareRunDir();
  // The flags every process gets: the token file and the checked TLS flags.
  absl::StatusOr<std::vector<std::string>> CommonArgs() const;
  // The servers, workers and coordinator at `ports` (the coordinator's
  // first), each with `common_args` and its own flags.
  void AddClusterMembers(const std::vector<int>& ports,
                         const std::string& ps_bin,
                         const std::string& worker_bin,
                         const std::string& chief_bin,
                         const std::vector<std::string>& common_args);
  // The evaluator, watching the checkpoint folder the coordinator writes.
  void AddEvaluator(const std::string& evaluator_bin);
  absl::Status PrepareToken();
  absl::Status StartAll();
  absl::Status WritePidFile(const ClusterMember& member, pid_t pid) const;
  // Applies the restart rule to a process that died while the job runs.
  // True when it runs again; otherwise `*why` says why it was not restarted.
  bool TryRestart(const ChildExit& exit, std::string* why);
  const ClusterMember* MemberNamed(const std::string& name) const;
  // The next exit to handle: one set aside earlier, else WaitAny(timeout).
  std::optional<ChildExit> NextExit(absl::Duration timeout);
  // Waits up to `settle` for a process to exit cleanly and returns it; other
  // exits seen meanwhile are set aside for NextExit.
  std::optional<ChildExit> AwaitCleanExit(absl::Duration settle);
  // Runs the coordinator's --dry_run on the cluster about to start. Returns
  // an exit code when the launcher is done (the user asked for the dry run,
  // or the coordinator refused the job: refused once, before any process
  // starts, with the coordinator's own words), nullopt to go on.
  std::optional<int> Preflight();
  int Supervise();
  // Says how the evaluator ended; training goes on either way.
  void ReportEvaluatorExit(const ChildExit& exit);
  // The coordinator exited: the launcher's exit code, or nullopt when it
  // was restarted. `why` says why it would not be restarted.
  std::optional<int> ChiefExited(const ChildExit& exit, bool restartable,
                                 std::string why);
  // The coordinator ended with `code`: 0, or kStoppedExitCode for a job an
  // operator stopped, which the launcher exits with too.
  int Succeed(int code = 0);
  int Fail(const ChildExit& dead, absl::string_view why);
  // --elastic: a worker's exit while the job runs. True when handled (the
  // job goes on without it, or with it restarted).
  bool WorkerLeft(const ChildExit& exit);
  int Interrupted();
  void StopEveryone();

  std::string Describe(const ChildExit& exit) const {
    return absl::StrFormat("%s (pid %d)", Label(exit.name), exit.pid);
  }
  static std::string Label(const std::string& name);
  std::string LogPath(const std::string& name) const {
    return absl::StrCat(run_dir_, "/", name, ".log");
  }

  const LauncherOptions options_;
  const std::vector<std::string> coordinator_args_;
  SignalWatcher* const signals_;
  const absl::Duration grace_;
  std::string run_dir_;
  nlohmann::json cluster_;
  std::string token_file_;
  std::vector<ClusterMember> members_;  // Start order: ps, workers, chief.
  ProcessGroup group_;
  RestartPolicy restarts_;
  std::deque<ChildExit> set_aside_;  // Reaped, not yet handled.
  std::optional<LogFollower> chief_echo_;
};

}  // namespace tessera

#endif  // TESSERA_DEPLOY_LOCAL_LAUNCHER_H_
