// RestartPolicy decides what becomes of a child of a ProcessGroup that
// exited while the job runs, and restarts it when the rule says so. The local
// launcher uses it so that a parameter server, worker or coordinator that
// crashes comes back at the same address with the same flags (the
// coordinator then restores the parameter server, or resumes from its
// newest checkpoint).
//
// The rule, for each exit that OnExit() is given:
//  - exit code 0: the child finished; never restarted (kFinished).
//  - exit code kConfigErrorExitCode (2, the Tessera binaries' code for a bad
//    command line or configuration): the same command line would fail the
//    same way, so it is not restarted (kNotRestartable); nor is
//    kStoppedExitCode (3, a job an operator stopped).
//  - a signal or any other code: restarted with the spec it was first
//    started with, its log appended to after a separator line
//    "=== restart N after signal 9 ===" (or "... after exit code 1 ==="), at
//    most `max_restarts` times per child (kRestarted); after that
//    kExhausted. kStartFailed, with the status, when the new start fails.
//
// Not thread-safe; used by the thread that owns the ProcessGroup.

#ifndef TESSERA_DEPLOY_LOCAL_RESTART_POLICY_H_
#define TESSERA_DEPLOY_LOCAL_RESTART_POLICY_H_

#include <sys/types.h>

#include <map>
#include <string>

#include "absl/status/status.h"
#include "common/exit_code.h"
#include "deploy/local/process_group.h"

namespace tessera {

// What the binaries return for a bad command line, configuration or path.
inline constexpr int kConfigErrorExitCode = kExitUserError;
// What the coordinator returns when an operator stopped the job before its
// epochs were all trained.
inline constexpr int kStoppedExitCode = kExitStopped;

// "signal 9" or "exit code 3": how `status` ended, in few words.
std::string DeathCause(const ExitStatus& status);

class RestartPolicy {
 public:
  enum class Outcome {
    kFinished,        // Exited 0.
    kNotRestartable,  // Exited kConfigErrorExitCode.
    kRestarted,       // Running again; `pid` is the new process.
    kExhausted,       // Died after max_restarts restarts.
    kStartFailed,     // The restart itself failed; see `status`.
  };

  struct Decision {
    Outcome outcome = Outcome::kFinished;
    // Restarts of this child so far, this one included.
    int restarts = 0;
    pid_t pid = -1;       // The new pid when kRestarted.
    absl::Status status;  // Why when kStartFailed.
  };

  // `group` must outlive the policy. max_restarts >= 0; 0 never restarts.
  RestartPolicy(ProcessGroup* group, int max_restarts)
      : group_(group), max_restarts_(max_restarts) {}
  RestartPolicy(const RestartPolicy&) = delete;
  RestartPolicy& operator=(const RestartPolicy&) = delete;

  // Applies the rule to `exit`, a child of the group that WaitAny() just
  // reaped.
  Decision OnExit(const ChildExit& exit);

  // Whether OnExit(exit) would try a restart (kRestarted or kStartFailed),
  // without doing anything.
  bool WouldRestart(const ChildExit& exit) const;

  int max_restarts() const { return max_restarts_; }
  // Restarts of child `name` so far.
  int restarts(const std::string& name) const;

 private:
  ProcessGroup* const group_;
  const int max_restarts_;
  std::map<std::string, int> restarts_;
};

}  // namespace tessera

#endif  // TESSERA_DEPLOY_LOCAL_RESTART_POLICY_H_
