#include "deploy/local/process_group.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

extern char** environ;

namespace tessera {
namespace {

// Short enough that the launcher notices a dead child promptly, long enough
// that polling costs nothing measurable.
constexpr absl::Duration kPollInterval = absl::Milliseconds(10);

// The destructor is a safety net; callers choose their own grace period.
constexpr absl::Duration kDestructorGrace = absl::Seconds(5);

// Opens `path` close-on-exec at a descriptor above 2, so that the dup2()
// calls in the child can never clobber one of these fds before using it.
int OpenAbove2(const char* path, int flags, mode_t mode) {
  int fd = open(path, flags | O_CLOEXEC, mode);
  if (fd < 0 || fd > 2) return fd;
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  close(fd);
  errno = saved;
  return high;
}

// Async-signal-safe: runs in the child between fork and exec.
void MoveFdOrDie(int from, int to) {
  if (from == to) {
    if (fcntl(to, F_SETFD, 0) == 0) return;
  } else if (dup2(from, to) == to) {
    return;
  }
  _exit(126);
}

// Async-signal-safe: reports errno to the parent through the exec pipe.
[[noreturn]] void ChildFail(int pipe_fd) {
  int err = errno;
  ssize_t unused = write(pipe_fd, &err, sizeof(err));
  (void)unused;
  _exit(127);
}

// Async-signal-safe. Descriptors the launcher opened without O_CLOEXEC
// (glog files, anything a library leaked) must not reach the children.
void MarkInheritedFdsCloexec() {
#if defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
  if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
  for (int fd = 3; fd < 4096; ++fd) {
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

absl::Status CheckExecutable(const std::string& binary) {
  struct stat st;
  if (stat(binary.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("binary not found: ", binary, ": ", strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("binary is not a regular file: ", binary));
  }
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("binary is not executable: ", binary));
  }
  return absl::OkStatus();
}

// The launcher's environment with `overrides` replacing same-named entries.
std::vector<std::string> BuildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::set<std::string> names;
  for (const auto& [name, value] : overrides) names.insert(name);
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    if (names.count(name) == 0) env.push_back(std::move(entry));
  }
  for (const auto& [name, value] : overrides) {
    env.push_back(absl::StrCat(name, "=", value));
  }
  return env;
}

std::vector<char*> PointerArray(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  ExitStatus status;
  if (WIFSIGNALED(wait_status)) {
    status.signaled = true;
    status.signal = WTERMSIG(wait_status);
  } else if (WIFEXITED(wait_status)) {
    status.code = WEXITSTATUS(wait_status);
  }
  return status;
}

std::string ExitStatus::ToString() const {
  if (signaled) {
    return absl::StrFormat("killed by signal %d (%s)", signal,
                           SignalName(signal));
  }
  return absl::StrFormat("exited with code %d", code);
}

std::string SignalName(int signal) {
  static constexpr struct {
    int number;
    const char* name;
  } kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
      {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
      {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
      {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
      {SIGCHLD, "SIGCHLD"}, {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"},
      {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"},
      {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGVTALRM, "SIGVTALRM"},
      {SIGPROF, "SIGPROF"}, {SIGSYS, "SIGSYS"},
  };
  for (const auto& entry : kNames) {
    if (entry.number == signal) return entry.name;
  }
  return absl::StrCat("signal ", signal);
}

ProcessGroup::~ProcessGroup() {
  if (num_running() > 0) {
    LOG(WARNING) << "ProcessGroup destroyed with " << num_running()
                 << " running children; stopping them";
    StopAll(kDestructorGrace);
  }
}

absl::StatusOr<pid_t> ProcessGroup::Start(const ChildSpec& spec) {
  if (spec.name.empty()) {
    return absl::InvalidArgumentError("child name must not be empty");
  }
  for (const Child& child : children_) {
    if (child.name == spec.name) {
      return absl::AlreadyExistsError(
          absl::StrCat("a child named ", spec.name, " was already started"));
    }
  }
  absl::StatusOr<pid_t> pid = Spawn(spec);
  if (!pid.ok()) return pid.status();
  Child child;
  child.name = spec.name;
  child.pid = *pid;
  child.log_path = spec.log_path;
  child.spec = spec;
  children_.push_back(std::move(child));
  return *pid;
}

absl::StatusOr<pid_t> ProcessGroup::Restart(const std::string& name) {
  auto it =
      std::find_if(children_.begin(), children_.end(),
                   [&](const Child& child) { return child.name == name; });
  if (it == children_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no child named ", name, " to restart"));
  }
  if (it->running) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot restart ", name, " (pid ", it->pid, "): it is still running"));
  }
  // The leader is reaped, but its group lives on while anything it spawned
  // does (the kernel keeps the group's id out of use until then), and that
  // may hold the port the new child must bind. StopAll() signals exited
  // children's groups the same way.
  killpg(it->pid, SIGKILL);
  absl::StatusOr<pid_t> pid = Spawn(it->spec);
  if (!pid.ok()) return pid.status();
  it->pid = *pid;
  it->running = true;
  it->status = ExitStatus{};
  return *pid;
}

namespace {

// The child after fork(): its own process group, killed with the
// launcher, stdin from /dev/null, stdout and stderr into its log, default
// signals, then execve(). Async-signal-safe calls only; an errno written
// to `exec_error` says why it did not run.
[[noreturn]] void ExecChild(pid_t launcher_pid, int null_fd, int log_fd,
                            int exec_error, char* const* argv,
                            char* const* envp) {
  setpgid(0, 0);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ChildFail(exec_error);
  // The launcher may have died before prctl() took effect.
  if (getppid() != launcher_pid) _exit(1);
  MoveFdOrDie(null_fd, STDIN_FILENO);
  MoveFdOrDie(log_fd, STDOUT_FILENO);
  MoveFdOrDie(log_fd, STDERR_FILENO);
  // The launcher blocks SIGINT/SIGTERM for its signal thread; the mask and
  // ignored dispositions would otherwise survive exec.
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  MarkInheritedFdsCloexec();
  execve(argv[0], argv, envp);
  ChildFail(exec_error);
}

// The parent after fork(): waits for the child's execve() (the pipe
// closed by exec, or an errno in it). FailedPrecondition naming the
// binary when it did not run; the child is then reaped.
absl::Status AwaitExec(pid_t pid, int exec_result, const std::string& binary) {
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(exec_result, &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_result);
  if (n > 0) {
    int wait_status;
    while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot execute ", binary, ": ", strerror(child_errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<pid_t> ProcessGroup::Spawn(const ChildSpec& spec) {
  if (absl::Status status = CheckExecutable(spec.binary); !status.ok()) {
    return status;
  }

  // Everything the child needs is prepared here: after fork() in a
  // multi-threaded process it may only make async-signal-safe calls.
  std::vector<std::string> argv_storage;
  argv_storage.push_back(spec.binary);
  argv_storage.insert(argv_storage.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv = PointerArray(argv_storage);
  std::vector<std::string> env_storage = BuildEnvironment(spec.env);
  std::vector<char*> envp = PointerArray(env_storage);

  int log_fd =
      OpenAbove2(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat(
        "cannot open log file ", spec.log_path, ": ", strerror(errno)));
  }
  int null_fd = OpenAbove2("/dev/null", O_RDONLY, 0);
  if (null_fd < 0) {
    int err = errno;
    close(log_fd);
    return absl::InternalError(
        absl::StrCat("cannot open /dev/null: ", strerror(err)));
  }
  // The child writes errno here if execve() fails; a clean EOF (the pipe
  // closed by exec) means the binary is running.
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    close(log_fd);
    close(null_fd);
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(err)));
  }
  for (int i = 0; i < 2; ++i) {
    if (exec_pipe[i] <= 2) {
      int high = fcntl(exec_pipe[i], F_DUPFD_CLOEXEC, 3);
      close(exec_pipe[i]);
      exec_pipe[i] = high;
    }
  }

  const pid_t launcher_pid = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(log_fd);
    close(null_fd);
    close(exec_pipe[0]);
    close(exec_pipe[1]);
    return absl::InternalError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) {
    ExecChild(launcher_pid, null_fd, log_fd, exec_pipe[1], argv.data(),
              envp.data());
  }

  // Parent. Also set the group here so it is in place before we might
  // signal it, whichever of parent and child runs first.
  setpgid(pid, pid);
  close(exec_pipe[1]);
  close(log_fd);
  close(null_fd);
  if (absl::Status s = AwaitExec(pid, exec_pipe[0], spec.binary); !s.ok()) {
    return s;
  }
  return pid;
}

bool ProcessGroup::Reap(Child& child, bool block) {
  if (!child.running) return true;
  int wait_status = 0;
  pid_t r;
  do {
    r = waitpid(child.pid, &wait_status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  child.running = false;
  if (r == child.pid) {
    child.status = ExitStatus::FromWaitStatus(wait_status);
  } else {
    // Someone else reaped it (e.g. SIGCHLD set to SIG_IGN); the status is
    // lost, but the child is certainly gone.
    LOG(WARNING) << "waitpid(" << child.pid << ") for " << child.name
                 << " failed: " << strerror(errno);
    child.status = ExitStatus{};
    child.status.code = -1;
  }
  return true;
}

std::optional<ChildExit> ProcessGroup::WaitAny(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    bool any_running = false;
    for (Child& child : children_) {
      if (!child.running) continue;
      if (Reap(child, /*block=*/false)) {
        return ChildExit{child.name, child.pid, child.status};
      }
      any_running = true;
    }
    if (!any_running) return std::nullopt;
    const absl::Time now = absl::Now();
    if (now >= deadline) return std::nullopt;
    absl::SleepFor(std::min(kPollInterval, deadline - now));
  }
}

void ProcessGroup::SignalGroups(int signal) const {
  for (const Child& child : children_) {
    killpg(child.pid, signal);
    // Only if the child never became a group leader; signalling it directly
    // as well would deliver the signal twice, which some programs read as
    // "hurry up".
    if (child.running && getpgid(child.pid) != child.pid) {
      kill(child.pid, signal);
    }
  }
}

std::vector<ChildExit> ProcessGroup::StopAll(absl::Duration grace,
                                             std::function<bool()> cut_short) {
  std::vector<ChildExit> reaped;
  auto reap_all = [&](bool block) {
    for (Child& child : children_) {
      if (child.running && Reap(child, block)) {
        reaped.push_back(ChildExit{child.name, child.pid, child.status});
      }
    }
  };

  SignalGroups(SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (true) {
    reap_all(/*block=*/false);
    if (num_running() == 0) break;
    if (absl::Now() >= deadline) break;
    if (cut_short && cut_short()) break;
    absl::SleepFor(kPollInterval);
  }
  for (const Child& child : children_) {
    if (child.running) {
      LOG(WARNING) << child.name << " (pid " << child.pid
                   << ") still running after SIGTERM; sending SIGKILL";
    }
  }
  // Also when every child exited in time: whatever they spawned got the
  // SIGTERM too and has had as long as they did. Waiting for their groups to
  // empty instead would hang on orphaned zombies wherever init is slow to
  // reap them.
  SignalGroups(SIGKILL);
  reap_all(/*block=*/true);
  return reaped;
}

const ProcessGroup::Child* ProcessGroup::Find(pid_t pid) const {
  for (const Child& child : children_) {
    if (child.pid == pid) return &child;
  }
  return nullptr;
}

int ProcessGroup::num_running() const {
  return static_cast<int>(
      std::count_if(children_.begin(), children_.end(),
                    [](const Child& child) { return child.running; }));
}

}  // namespace tessera
