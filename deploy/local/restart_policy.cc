#include "deploy/local/restart_policy.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace tessera {
namespace {

// Marks in the child's log where the next run's output starts, so a reader
// can tell the runs apart and see why the earlier one ended.
void WriteSeparator(const std::string& log_path, int restart,
                    const ExitStatus& status) {
  std::ofstream log(log_path, std::ios::app);
  log << "=== restart " << restart << " after " << DeathCause(status)
      << " ===\n";
  log.close();
  if (!log) {
    LOG(WARNING) << "cannot append the restart line to " << log_path;
  }
}

}  // namespace

std::string DeathCause(const ExitStatus& status) {
  return status.signaled ? absl::StrCat("signal ", status.signal)
                         : absl::StrCat("exit code ", status.code);
}

bool RestartPolicy::WouldRestart(const ChildExit& exit) const {
  return !exit.status.success() &&
         (exit.status.signaled || (exit.status.code != kConfigErrorExitCode &&
                                   exit.status.code != kStoppedExitCode)) &&
         restarts(exit.name) < max_restarts_;
}

RestartPolicy::Decision RestartPolicy::OnExit(const ChildExit& exit) {
  Decision decision;
  int& restarts = restarts_[exit.name];
  decision.restarts = restarts;
  if (exit.status.success()) {
    decision.outcome = Outcome::kFinished;
    return decision;
  }
  if (!exit.status.signaled && (exit.status.code == kConfigErrorExitCode ||
                                exit.status.code == kStoppedExitCode)) {
    decision.outcome = Outcome::kNotRestartable;
    return decision;
  }
  if (!WouldRestart(exit)) {
    decision.outcome = Outcome::kExhausted;
    return decision;
  }
  decision.restarts = ++restarts;
  for (const ProcessGroup::Child& child : group_->children()) {
    if (child.name == exit.name) {
      WriteSeparator(child.log_path, restarts, exit.status);
    }
  }
  absl::StatusOr<pid_t> pid = group_->Restart(exit.name);
  if (!pid.ok()) {
    decision.outcome = Outcome::kStartFailed;
    decision.status = pid.status();
    return decision;
  }
  decision.outcome = Outcome::kRestarted;
  decision.pid = *pid;
  return decision;
}

int RestartPolicy::restarts(const std::string& name) const {
  auto it = restarts_.find(name);
  return it == restarts_.end() ? 0 : it->second;
}

}  // namespace tessera
