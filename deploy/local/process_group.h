// ProcessGroup starts the processes of a local Tessera cluster and makes sure
// none of them outlives the launcher.
//
// Contract:
//  - Start() forks and execs `binary` with `args`, the launcher's environment
//    plus the given variables (which replace inherited ones of the same name),
//    stdin from /dev/null, and stdout and stderr appended to `log_path`. It
//    fails with a Status naming the binary when the binary is missing or not
//    executable, or when exec fails in the child.
//  - Every child leads its own process group (so a terminal Ctrl-C reaches
//    only the launcher, which then stops the children in order, and so
//    stopping a child also stops anything it spawned) and has
//    PR_SET_PDEATHSIG(SIGKILL) (so children die even if the launcher is
//    SIGKILLed; that covers the children themselves, not what they spawn).
//  - WaitAny() reaps the first child to exit and says who it was and how it
//    ended. Restart() starts an exited child again from the spec it was
//    first started with (deploy/local/restart_policy.h decides when).
//    StopAll() sends SIGTERM to every child's process group, waits up
//    to a grace period, then sends SIGKILL and reaps. The destructor calls
//    StopAll() as a last resort.
//  - Only children started by this group are ever waited for or signalled.
//  - Not thread-safe: one thread owns the group, and it must outlive the
//    children because the kernel ties PR_SET_PDEATHSIG to the forking thread
//    (use the main thread). Start() is safe in a multi-threaded process: the
//    child does only async-signal-safe work between fork and exec.

#ifndef TESSERA_DEPLOY_LOCAL_PROCESS_GROUP_H_
#define TESSERA_DEPLOY_LOCAL_PROCESS_GROUP_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera {

// How a process ended, decoded from a waitpid() status.
struct ExitStatus {
  bool signaled = false;  // Killed by a signal rather than exiting.
  int code = 0;           // Exit code; meaningful when !signaled.
  int signal = 0;         // Terminating signal; meaningful when signaled.

  static ExitStatus FromWaitStatus(int wait_status);

  bool success() const { return !signaled && code == 0; }

  // "exited with code 3" or "killed by signal 9 (SIGKILL)".
  std::string ToString() const;
};

// "SIGKILL" for 9, "signal 42" for signals without a well-known name.
std::string SignalName(int signal);

// What to start: a named child, its binary and arguments (without argv[0]),
// extra environment variables, and the log file for its stdout and stderr.
struct ChildSpec {
  std::string name;
  std::string binary;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string log_path;
};

// A child that has exited and been reaped.
struct ChildExit {
  std::string name;
  pid_t pid = -1;
  ExitStatus status;
};

class ProcessGroup {
 public:
  struct Child {
    std::string name;
    pid_t pid = -1;
    std::string log_path;
    bool running = true;
    ExitStatus status;  // Meaningful once !running.
    ChildSpec spec;     // What Start() was given; Restart() reuses it.
  };

  ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  ~ProcessGroup();

  // Starts a child; returns its pid. Names must be unique within the group.
  absl::StatusOr<pid_t> Start(const ChildSpec& spec);

  // Starts the exited child `name` again from the spec it was first started
  // with: same binary, arguments and environment, its log appended to. What
  // the dead child spawned is killed first (SIGKILL to its old process
  // group), so nothing of it holds a port the new one needs. Returns the new
  // pid, which replaces the old one in children(). NotFound when no child
  // has that name, FailedPrecondition while it still runs, or Start()'s
  // errors (the child then stays exited).
  absl::StatusOr<pid_t> Restart(const std::string& name);

  // Waits up to `timeout` (absl::InfiniteDuration() to block) for any running
  // child to exit, reaps it and returns it. Returns nullopt on timeout, or at
  // once when no child is running.
  std::optional<ChildExit> WaitAny(absl::Duration timeout);

  // Stops every running child: SIGTERM to its process group, up to `grace`
  // for the children to exit, then SIGKILL to whatever is left in their
  // groups. Groups of children that exited earlier are signalled too, so
  // nothing a child spawned survives it. When `cut_short` is given and
  // returns true (it is polled while waiting), the grace period ends early.
  // Returns the children reaped here.
  std::vector<ChildExit> StopAll(absl::Duration grace,
                                 std::function<bool()> cut_short = nullptr);

  const std::vector<Child>& children() const { return children_; }
  const Child* Find(pid_t pid) const;
  int num_running() const;

 private:
  // Forks and execs `spec`; the checks and error messages of Start().
  absl::StatusOr<pid_t> Spawn(const ChildSpec& spec);

  // Reaps `child` if it has exited; with `block`, waits until it does.
  // Returns true when the child is (now) no longer running.
  bool Reap(Child& child, bool block);

  void SignalGroups(int signal) const;

  std::vector<Child> children_;
};

}  // namespace tessera

#endif  // TESSERA_DEPLOY_LOCAL_PROCESS_GROUP_H_
