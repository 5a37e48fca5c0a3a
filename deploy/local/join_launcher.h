// JoinLauncher starts workers that join a job a Launcher already runs
// (tessera_local --join=RUN_DIR), once it has seen that the job still runs
// (deploy/local/running_job.h): each asks the job's coordinator, named in
// RUN_DIR/cluster.json, to take it (tessera_worker --join), with the job's
// token (RUN_DIR/job.token unless --job_token_file says otherwise) and the
// launcher's TLS flags. Their logs go to RUN_DIR/joined-N.log and their
// pids to RUN_DIR/pids/joined-N, N counting on from the joins before.
// Nobody restarts them: a worker that dies is the coordinator's to handle
// (--remove_lost_workers).
//
// Contract: Run() is called once, on the thread that owns `signals`; it
// returns when every worker it started has exited (the coordinator tells
// them to at the job's end, or when they drained): 0 when all exited 0,
// kExitUserError for a bad run folder, a job that no longer runs (then
// nothing is written into RUN_DIR), or when a worker was refused as a
// bad configuration (exit 2: a mirrored job, a wrong token), 1 otherwise,
// 130 when interrupted (its workers are stopped).
#ifndef TESSERA_DEPLOY_LOCAL_JOIN_LAUNCHER_H_
#define TESSERA_DEPLOY_LOCAL_JOIN_LAUNCHER_H_

#include <string>

#include "absl/status/status.h"
#include "deploy/local/launcher.h"
#include "deploy/local/process_group.h"
#include "deploy/local/signal_watcher.h"

namespace tessera {

class JoinLauncher {
 public:
  // Uses num_workers (how many join), bin_dir, data_plane, grace_period_s
  // and the security of `options`; `run_dir` is the running job's folder.
  JoinLauncher(LauncherOptions options, std::string run_dir,
               SignalWatcher* signals);

  int Run();

 private:
  absl::Status StartWorkers();
  int Supervise();

  const LauncherOptions options_;
  const std::string run_dir_;
  SignalWatcher* const signals_;
  ProcessGroup group_;
};

}  // namespace tessera

#endif  // TESSERA_DEPLOY_LOCAL_JOIN_LAUNCHER_H_
