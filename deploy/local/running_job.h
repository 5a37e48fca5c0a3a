// Whether the job of a tessera_local run folder still runs: its coordinator,
// whose pid the launcher keeps in RUN_DIR/pids/chief-0, is alive and is that
// job's (its command line names RUN_DIR in --run_dir, so a pid the system
// has since given to another process does not count). tessera_local --join
// asks this before it starts or writes anything: a worker joining a job that
// ended waited out --join_timeout_s (5 minutes) in silence.
#ifndef TESSERA_DEPLOY_LOCAL_RUNNING_JOB_H_
#define TESSERA_DEPLOY_LOCAL_RUNNING_JOB_H_

#include <string>

#include "absl/status/status.h"

namespace tessera {

// OK when the coordinator of the job in `run_dir` runs on this machine.
// FailedPrecondition saying why not otherwise: no pids/chief-0 (the job
// never started its coordinator, or `run_dir` is no run folder of
// tessera_local), or the coordinator has exited (the job ended). Reads only.
absl::Status CheckJobRunning(const std::string& run_dir);

}  // namespace tessera

#endif  // TESSERA_DEPLOY_LOCAL_RUNNING_JOB_H_
