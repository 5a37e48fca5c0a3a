// tessera_local runs a whole Tessera cluster on this machine: parameter
// servers, workers and the coordinator, wired together through TF_CONFIG on
// free 127.0.0.1 ports, with every process's output in <run_dir>/<name>.log.
//
//   tessera_local --num_ps=2 --num_workers=4 -- --epochs=10
//
// Launcher flags are listed below; every other argument (and everything after
// "--") is passed to the coordinator, followed by --run_dir=<run_dir>. Flags
// the launcher itself knows (its own, glog's, gflags') must come after "--"
// to reach the coordinator instead. Children get TF_CONFIG and, unless the
// environment already sets GLOG_logtostderr or GLOG_log_dir,
// GLOG_logtostderr=1 so that their glog output lands in their log files. The
// coordinator's log is echoed to stdout as it grows.
//
// Each run gets its own job token (common/rpc_auth.h) in <run_dir>/job.token,
// readable by the user only, and every process gets --job_token_file naming
// it, so only this job's processes can call each other (a --job_token_file
// given to the launcher is used instead). --tls_cert, --tls_key, --tls_ca
// (and --tls_target_name_override) given to the launcher are checked and
// passed to every process, so the whole job talks mutual TLS; the
// certificate must name 127.0.0.1 (or the override). The coordinator also gets
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
// Exit status (common/exit_code.h, docs/exit_codes.md): 0 when the
// coordinator succeeds; 3 when an operator stopped the job
// before its epochs were all trained (tessera_ctl stop); 2 for a mistake in the
// launcher's flags or paths, or when the coordinator or another process exited
// 2 (a bad job, a data file that is not there); 1 when the coordinator fails
// otherwise, when a parameter server or worker dies before it finishes and
// cannot be restarted (no restarts left), or when the cluster cannot be
// started; 130 when interrupted by SIGINT, SIGTERM or SIGHUP. In every case all
// started processes are stopped before the launcher exits.

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/exit_code.h"
#include "common/rpc_auth.h"
#include "common/security_flags.h"
#include "common/tls_credentials.h"
#include "deploy/build_root.h"
#include "deploy/local/free_ports.h"
#include "deploy/local/log_tail.h"
#include "deploy/local/process_group.h"
#include "deploy/local/restart_policy.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

DEFINE_int32(num_ps, 2,
             "Number of parameter servers to start (0: mirrored training).");
DEFINE_int32(num_workers, 2, "Number of workers to start.");
DEFINE_string(data_plane, "",
              "Passed to every worker as --data_plane (grpc or tcp: how "
              "dense tensors travel to the parameter servers); empty: the "
              "workers' default.");
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
DEFINE_int32(max_restarts, 3,
             "Times each parameter server, worker and the coordinator is "
             "restarted when it dies while the job runs (0: never; the first "
             "death then stops the job).");

namespace tessera {
namespace {

constexpr int kExitFailure = kExitRetryable;
constexpr int kTailLines = 20;
constexpr char kHost[] = "127.0.0.1";
constexpr char kChiefName[] = "chief";
constexpr char kEvaluatorName[] = "evaluator";

// How often the main loop checks for signals while waiting on children.
constexpr absl::Duration kTick = absl::Milliseconds(100);

// How long a coordinator's non-zero exit is watched for servers that exit
// cleanly right after it (the shutdown it sent before failing), before it
// is restarted.
constexpr absl::Duration kShutdownSettle = absl::Seconds(2);

// Both threads write whole messages through stdio, whose per-FILE lock keeps
// lines from the coordinator echo and the launcher's own from interleaving.
template <typename... Args>
void Say(const absl::FormatSpec<Args...>& format, const Args&... args) {
  absl::FPrintF(stdout, format, args...);
  std::fflush(stdout);
}

template <typename... Args>
void Complain(const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::fflush(stdout);
  absl::FPrintF(stderr, format, args...);
  std::fflush(stderr);
}

// Takes SIGINT, SIGTERM and SIGHUP off the signal-handler path: they are
// blocked in every thread and collected by sigtimedwait() on a dedicated
// thread, so no work happens in async-signal context. Must be constructed
// before any other thread starts, since threads inherit the signal mask and
// one without it would take the default action (dying, orphaning children).
class SignalWatcher {
 public:
  explicit SignalWatcher(int grace_period_s) : grace_period_s_(grace_period_s) {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    // Under nohup the cluster must survive the terminal going away. SIGINT
    // is watched even when inherited as ignored (as for "cmd &" in a script),
    // since blocked signals are still queued and kill -INT should work.
    struct sigaction hup;
    if (sigaction(SIGHUP, nullptr, &hup) != 0 || hup.sa_handler != SIG_IGN) {
      sigaddset(&signals_, SIGHUP);
    }
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    thread_ = std::thread([this] { Run(); });
  }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  ~SignalWatcher() {
    done_ = true;
    thread_.join();
  }

  // Number of signals caught so far, and the first of them (0 if none).
  int count() const { return count_; }
  int first() const { return first_; }

 private:
  void Run() {
    // The timeout only bounds how long the destructor waits for this thread.
    const timespec timeout = {0, 100 * 1000 * 1000};
    while (!done_) {
      siginfo_t info;
      const int sig = sigtimedwait(&signals_, &info, &timeout);
      if (sig <= 0) continue;
      int none = 0;
      first_.compare_exchange_strong(none, sig);
      const int n = ++count_;
      if (n == 1) {
        Complain(
            "\ntessera_local: caught %s; stopping all processes (send it "
            "again to skip the %ds grace period)\n",
            SignalName(sig), grace_period_s_);
      } else if (n == 2) {
        Complain("\ntessera_local: caught %s again; killing all processes\n",
                 SignalName(sig));
      }
    }
  }

  const int grace_period_s_;
  sigset_t signals_;
  std::atomic<bool> done_{false};
  std::atomic<int> count_{0};
  std::atomic<int> first_{0};
  std::thread thread_;
};

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
    }
  }
  return split;
}

std::string Timestamp() {
  const time_t now = time(nullptr);
  struct tm local;
  localtime_r(&now, &local);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &local);
  return buf;
}

// Creates the run folder and returns its absolute path. The default name gets
// a suffix if taken, so two launches in the same second keep separate logs;
// create_directory() is the atomic claim, so they cannot both pick one name.
absl::StatusOr<std::string> MakeRunDir(const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path dir;
  if (!flag.empty()) {
    dir = fs::absolute(flag, error);
    if (!error) fs::create_directories(dir, error);
  } else {
    const fs::path base = fs::absolute(fs::path("runs") / Timestamp(), error);
    dir = base;
    if (!error) fs::create_directories(base.parent_path(), error);
    for (int i = 2; !error && !fs::create_directory(dir, error) && !error;
         ++i) {
      dir = fs::path(absl::StrCat(base.string(), "-", i));
    }
  }
  if (error) {
    // errno's code: a --run_dir under a file or a folder the user may not
    // write is their mistake (exit 2), a full disk is not.
    return absl::ErrnoToStatus(
        error.value(), absl::StrCat("cannot create run folder ", dir.string()));
  }
  return dir.lexically_normal().string();
}

absl::Status CheckBinaries(const std::vector<std::string>& binaries) {
  std::vector<std::string> problems;
  for (const std::string& binary : binaries) {
    struct stat st;
    if (stat(binary.c_str(), &st) != 0) {
      problems.push_back(absl::StrCat(binary, " (missing)"));
    } else if (!S_ISREG(st.st_mode) || access(binary.c_str(), X_OK) != 0) {
      problems.push_back(absl::StrCat(binary, " (not executable)"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(
      "cannot run ", absl::StrJoin(problems, ", "),
      "; build them first or point --bin_dir at the build root (or a "
      "bundle's bin/)"));
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::trunc);
  out << contents;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The launcher's files (the job token, pid files, cluster.json) are
// written whole (common/atomic_file.h), with an exact mode, so a reader
// never sees a partial file and an older file's looser mode never
// carries over.
absl::Status WriteWithMode(const std::string& path, const std::string& contents,
                           mode_t mode) {
  AtomicWriteOptions options;
  options.mode = mode;
  return WriteFileAtomically(path, contents, options);
}

struct Member {
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
  Launcher(std::vector<std::string> coordinator_args, SignalWatcher* signals)
      : coordinator_args_(std::move(coordinator_args)),
        signals_(signals),
        grace_(absl::Seconds(FLAGS_grace_period_s)),
        restarts_(&group_, FLAGS_max_restarts) {}

  int Run();

 private:
  absl::Status Prepare();
  absl::Status PrepareToken();
  absl::Status StartAll();
  absl::Status WritePidFile(const Member& member, pid_t pid) const;
  // Applies the restart rule to a process that died while the job runs.
  // True when it runs again; otherwise `*why` says why it was not restarted.
  bool TryRestart(const ChildExit& exit, std::string* why);
  const Member* MemberNamed(const std::string& name) const;
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
  // The coordinator ended with `code`: 0, or kStoppedExitCode for a job an
  // operator stopped, which the launcher exits with too.
  int Succeed(int code = 0);
  int Fail(const ChildExit& dead, absl::string_view why);
  int Interrupted();
  void StopEveryone();

  std::string Describe(const ChildExit& exit) const {
    return absl::StrFormat("%s (pid %d)", Label(exit.name), exit.pid);
  }
  static std::string Label(const std::string& name) {
    return name == kChiefName ? "coordinator" : name;
  }
  std::string LogPath(const std::string& name) const {
    return absl::StrCat(run_dir_, "/", name, ".log");
  }

  const std::vector<std::string> coordinator_args_;
  SignalWatcher* const signals_;
  const absl::Duration grace_;
  std::string run_dir_;
  nlohmann::json cluster_;
  std::string token_file_;
  std::vector<Member> members_;  // Start order: ps, workers, chief last.
  ProcessGroup group_;
  RestartPolicy restarts_;
  std::deque<ChildExit> set_aside_;  // Reaped, not yet handled.
  std::optional<LogFollower> chief_echo_;
};

absl::Status Launcher::Prepare() {
  std::string bin_dir = FLAGS_bin_dir;
  if (bin_dir.empty()) {
    absl::StatusOr<std::string> inferred = BuildRootOfThisLauncher();
    if (!inferred.ok()) return inferred.status();
    bin_dir = *inferred;
  }
  const std::string ps_bin = BinaryUnder(bin_dir, "tessera_ps");
  const std::string worker_bin = BinaryUnder(bin_dir, "tessera_worker");
  const std::string chief_bin = BinaryUnder(bin_dir, "tessera_coordinator");
  if (absl::Status status = CheckBinaries({ps_bin, worker_bin, chief_bin});
      !status.ok()) {
    return status;
  }

  absl::StatusOr<std::string> run_dir = MakeRunDir(FLAGS_run_dir);
  if (!run_dir.ok()) return run_dir.status();
  run_dir_ = *run_dir;
  if (absl::Status status = PrepareToken(); !status.ok()) return status;
  std::error_code error;
  std::filesystem::create_directories(run_dir_ + "/pids", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", run_dir_, "/pids: ", error.message()));
  }
  // Every process gets the job's token file, and the launcher's TLS
  // flags (checked here, so that a bad file or a key of another
  // certificate fails once, with the command-line exit code, rather than
  // in every process).
  std::vector<std::string> common_args = {
      absl::StrCat("--job_token_file=", token_file_)};
  absl::StatusOr<std::optional<TlsFiles>> tls = TlsFilesFromFlags();
  if (!tls.ok()) return tls.status();
  if (tls->has_value()) {
    for (const auto& [flag, value] :
         {std::pair<const char*, const std::string*>{"tls_cert",
                                                     &FLAGS_tls_cert},
          {"tls_key", &FLAGS_tls_key},
          {"tls_ca", &FLAGS_tls_ca}}) {
      common_args.push_back(absl::StrCat(
          "--", flag, "=", std::filesystem::absolute(*value).string()));
    }
    if (!FLAGS_tls_target_name_override.empty()) {
      common_args.push_back(absl::StrCat("--tls_target_name_override=",
                                         FLAGS_tls_target_name_override));
    }
  } else if (!FLAGS_tls_target_name_override.empty()) {
    return absl::InvalidArgumentError(
        "--tls_target_name_override needs TLS: --tls_cert, --tls_key and "
        "--tls_ca");
  }

  absl::StatusOr<std::vector<int>> ports =
      PickFreePorts(1 + FLAGS_num_ps + FLAGS_num_workers);
  if (!ports.ok()) return ports.status();
  auto address = [&](int i) { return absl::StrCat(kHost, ":", (*ports)[i]); };

  int next_port = 1;
  for (int i = 0; i < FLAGS_num_ps; ++i) {
    members_.push_back({absl::StrCat("ps-", i), "ps", i, address(next_port++),
                        ps_bin, common_args});
  }
  std::vector<std::string> worker_args = common_args;
  if (!FLAGS_data_plane.empty()) {
    worker_args.push_back(absl::StrCat("--data_plane=", FLAGS_data_plane));
  }
  for (int i = 0; i < FLAGS_num_workers; ++i) {
    members_.push_back({absl::StrCat("worker-", i), "worker", i,
                        address(next_port++), worker_bin, worker_args});
  }
  // The user's coordinator flags come last, so their --checkpoint_dir wins.
  std::vector<std::string> chief_args = common_args;
  chief_args.push_back(absl::StrCat("--run_dir=", run_dir_));
  chief_args.push_back(
      absl::StrCat("--checkpoint_dir=", run_dir_, "/checkpoints"));
  chief_args.insert(chief_args.end(), coordinator_args_.begin(),
                    coordinator_args_.end());
  members_.push_back(
      {kChiefName, "chief", 0, address(0), chief_bin, std::move(chief_args)});
  if (FLAGS_evaluator) {
    const std::string evaluator_bin = BinaryUnder(bin_dir, "tessera_evaluator");
    if (absl::Status status = CheckBinaries({evaluator_bin}); !status.ok()) {
      return status;
    }
    // It watches the folder the coordinator writes to: the user's
    // --checkpoint_dir when given (it comes last, so it wins there too).
    std::string checkpoints = run_dir_ + "/checkpoints";
    for (const std::string& arg : coordinator_args_) {
      for (const char* prefix : {"--checkpoint_dir=", "-checkpoint_dir="}) {
        if (absl::StartsWith(arg, prefix)) {
          checkpoints = arg.substr(std::strlen(prefix));
        }
      }
    }
    members_.push_back({kEvaluatorName,
                        "evaluator",
                        0,
                        "-",
                        evaluator_bin,
                        {absl::StrCat("--checkpoint_dir=", checkpoints),
                         absl::StrCat("--run_dir=", run_dir_)}});
  }

  cluster_ = nlohmann::json::object();
  for (const Member& member : members_) {
    // As in TensorFlow, the evaluator is a task outside the cluster.
    if (member.type == "evaluator") continue;
    cluster_[member.type].push_back(member.address);
  }
  return WriteFile(run_dir_ + "/cluster.json",
                   nlohmann::json{{"cluster", cluster_}}.dump(2) + "\n");
}

absl::Status Launcher::PrepareToken() {
  if (!FLAGS_job_token_file.empty()) {
    // The user's own token file: checked here so a bad one fails at once
    // rather than in every process.
    absl::StatusOr<std::string> token = JobTokenFromFlags();
    if (!token.ok()) return token.status();
    token_file_ = std::filesystem::absolute(FLAGS_job_token_file).string();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> token = GenerateJobToken();
  if (!token.ok()) return token.status();
  token_file_ = run_dir_ + "/job.token";
  return WriteWithMode(token_file_, *token + "\n", 0600);
}

absl::Status Launcher::WritePidFile(const Member& member, pid_t pid) const {
  return WriteWithMode(
      absl::StrCat(run_dir_, "/pids/", member.type, "-", member.index),
      absl::StrCat(pid, "\n"), 0644);
}

const Member* Launcher::MemberNamed(const std::string& name) const {
  for (const Member& member : members_) {
    if (member.name == name) return &member;
  }
  return nullptr;
}

absl::Status Launcher::StartAll() {
  // Children that use glog would otherwise log to /tmp rather than to the
  // run folder; a user's own GLOG_ setting wins.
  const bool set_glog = std::getenv("GLOG_logtostderr") == nullptr &&
                        std::getenv("GLOG_log_dir") == nullptr;
  Say("tessera_local: run folder %s\n", run_dir_);
  for (const Member& member : members_) {
    if (signals_->count() > 0) return absl::CancelledError("interrupted");
    ChildSpec spec;
    spec.name = member.name;
    spec.binary = member.binary;
    spec.args = member.args;
    nlohmann::json tf_config = {
        {"cluster", cluster_},
        {"task", {{"type", member.type}, {"index", member.index}}}};
    spec.env.emplace_back("TF_CONFIG", tf_config.dump());
    if (set_glog) spec.env.emplace_back("GLOG_logtostderr", "1");
    // Every task runs on this host: a worker's index is its local rank,
    // from which --device=auto picks its own GPU.
    if (member.type == "worker") {
      spec.env.emplace_back("TESSERA_LOCAL_RANK", std::to_string(member.index));
    }
    spec.log_path = LogPath(member.name);
    if (member.name == kChiefName) {
      // Started first so it sees the coordinator's very first line.
      chief_echo_.emplace(spec.log_path, [](absl::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      });
      chief_echo_->Start();
    }
    absl::StatusOr<pid_t> pid = group_.Start(spec);
    if (!pid.ok()) {
      return absl::Status(
          pid.status().code(),
          absl::StrCat("starting ", member.name, ": ", pid.status().message()));
    }
    if (absl::Status status = WritePidFile(member, *pid); !status.ok()) {
      return status;
    }
    Say("  %-10s %-21s pid %-8d log %s\n", member.name, member.address, *pid,
        spec.log_path);
  }
  return absl::OkStatus();
}

// Whether the coordinator's flags ask for --dry_run (gflags spellings:
// -dry_run, --dry_run, --dry_run=true/1/yes, --nodry_run; the last wins).
bool AsksForDryRun(const std::vector<std::string>& args) {
  bool dry_run = false;
  for (const std::string& arg : args) {
    if (arg == "--") break;
    absl::string_view flag = arg;
    if (!absl::ConsumePrefix(&flag, "--")) absl::ConsumePrefix(&flag, "-");
    if (flag == "dry_run") {
      dry_run = true;
    } else if (flag == "nodry_run") {
      dry_run = false;
    } else if (absl::ConsumePrefix(&flag, "dry_run=")) {
      dry_run = flag == "true" || flag == "1" || flag == "yes" || flag == "t" ||
                flag == "y";
    }
  }
  return dry_run;
}

std::optional<int> Launcher::Preflight() {
  const bool dry_run = AsksForDryRun(coordinator_args_);
  const Member* chief = MemberNamed(kChiefName);
  ChildSpec spec;
  spec.name = "preflight";
  spec.binary = chief->binary;
  spec.args = chief->args;
  spec.args.push_back("--dry_run");
  spec.env.emplace_back(
      "TF_CONFIG", nlohmann::json{{"cluster", cluster_},
                                  {"task", {{"type", "chief"}, {"index", 0}}}}
                       .dump());
  spec.env.emplace_back("GLOG_logtostderr", "1");
  spec.log_path = run_dir_ + "/preflight.log";
  absl::StatusOr<pid_t> pid = group_.Start(spec);
  if (!pid.ok()) {
    Complain("tessera_local: %s\n", pid.status().message());
    return kExitFailure;
  }
  std::optional<ChildExit> exit;
  while (!(exit = group_.WaitAny(kTick)).has_value()) {
    if (signals_->count() > 0) return Interrupted();
  }
  std::string output;
  {
    std::ifstream in(spec.log_path, std::ios::binary);
    output.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (dry_run) {
    std::fwrite(output.data(), 1, output.size(), stdout);
    std::fflush(stdout);
    // A dry run leaves nothing behind but what the user asked to keep.
    if (FLAGS_run_dir.empty()) {
      std::error_code error;
      std::filesystem::remove_all(run_dir_, error);
    }
    if (exit->status.success()) return 0;
    return !exit->status.signaled && exit->status.code == kConfigErrorExitCode
               ? kConfigErrorExitCode
               : kExitFailure;
  }
  if (exit->status.success()) return std::nullopt;
  Complain("%s", output);
  Complain(
      "tessera_local: the coordinator's check of the job %s; nothing was "
      "started (its output is in %s)\n",
      exit->status.ToString(), spec.log_path);
  return !exit->status.signaled && exit->status.code == kConfigErrorExitCode
             ? kConfigErrorExitCode
             : kExitFailure;
}

int Launcher::Run() {
  if (absl::Status status = Prepare(); !status.ok()) {
    Complain("tessera_local: %s\n", status.message());
    // A mistake in the launcher's flags or paths, as every binary reports
    // one.
    return ExitCodeFor(status);
  }
  if (std::optional<int> done = Preflight(); done.has_value()) return *done;
  if (absl::Status status = StartAll(); !status.ok()) {
    if (signals_->count() > 0) return Interrupted();
    Complain("tessera_local: %s\n", status.ToString());
    StopEveryone();
    return kExitFailure;
  }
  return Supervise();
}

int Launcher::Supervise() {
  // A server that exits cleanly before the coordinator is usually just the
  // shutdown it sent racing its own exit; only if the coordinator then fails
  // to finish is it a failure.
  std::optional<ChildExit> early_exit;
  absl::Time chief_deadline = absl::InfiniteFuture();
  while (true) {
    if (signals_->count() > 0) return Interrupted();
    std::optional<ChildExit> exit = NextExit(kTick);
    if (!exit.has_value()) {
      if (absl::Now() >= chief_deadline) {
        return Fail(*early_exit,
                    absl::StrFormat("%s before the coordinator finished, and "
                                    "the coordinator did not finish within "
                                    "%ds",
                                    early_exit->status.ToString(),
                                    FLAGS_grace_period_s));
      }
      continue;
    }
    // Once a process has exited cleanly the coordinator is shutting the
    // cluster down (it does so when it fails, too), and a restarted
    // process would only meet an emptying cluster.
    if (exit->name == kEvaluatorName) {
      // The evaluator follows training and never holds it up.
      if (exit->status.success()) {
        Say("tessera_local: the evaluator finished; see %s\n",
            LogPath(exit->name));
      } else {
        Complain(
            "tessera_local: warning: the evaluator %s; training goes on "
            "without it (see %s)\n",
            exit->status.ToString(), LogPath(exit->name));
      }
      continue;
    }
    std::string why;
    bool restartable = !early_exit.has_value();
    if (!restartable && !exit->status.success()) {
      why = absl::StrFormat("; not restarted, since %s had already exited",
                            early_exit->name);
    }
    if (exit->name == kChiefName) {
      if (exit->status.success()) return Succeed();
      if (!exit->status.signaled && exit->status.code == kStoppedExitCode) {
        return Succeed(kStoppedExitCode);
      }
      // The servers' clean exits may trail a coordinator that shut them
      // down and then exited by itself; one killed by a signal did not.
      if (restartable && !exit->status.signaled &&
          restarts_.WouldRestart(*exit)) {
        if (std::optional<ChildExit> clean = AwaitCleanExit(kShutdownSettle)) {
          restartable = false;
          why = absl::StrFormat(
              "; not restarted, since %s exited cleanly right after it (the "
              "coordinator shut the cluster down)",
              clean->name);
        }
      }
      if (restartable && TryRestart(*exit, &why)) continue;
      return Fail(*exit, absl::StrCat(exit->status.ToString(), why));
    }
    if (!exit->status.success()) {
      if (restartable && TryRestart(*exit, &why)) continue;
      return Fail(*exit, absl::StrCat(exit->status.ToString(),
                                      " before the coordinator finished", why));
    }
    if (!early_exit.has_value()) {
      early_exit = exit;
      chief_deadline = absl::Now() + grace_;
    }
  }
}

std::optional<ChildExit> Launcher::NextExit(absl::Duration timeout) {
  if (set_aside_.empty()) return group_.WaitAny(timeout);
  ChildExit exit = set_aside_.front();
  set_aside_.pop_front();
  return exit;
}

std::optional<ChildExit> Launcher::AwaitCleanExit(absl::Duration settle) {
  const absl::Time deadline = absl::Now() + settle;
  while (signals_->count() == 0) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    std::optional<ChildExit> exit = group_.WaitAny(std::min(kTick, left));
    if (!exit.has_value()) {
      if (group_.num_running() == 0) break;
      continue;
    }
    if (exit->status.success()) return exit;
    set_aside_.push_back(*exit);
  }
  return std::nullopt;
}

bool Launcher::TryRestart(const ChildExit& exit, std::string* why) {
  const RestartPolicy::Decision decision = restarts_.OnExit(exit);
  const Member* member = MemberNamed(exit.name);
  const std::string label = member != nullptr ? member->Label() : exit.name;
  switch (decision.outcome) {
    case RestartPolicy::Outcome::kRestarted:
      Say("tessera_local: %s died (%s); restarting it (%d of %d)\n", label,
          DeathCause(exit.status), decision.restarts, restarts_.max_restarts());
      if (member != nullptr) {
        if (absl::Status status = WritePidFile(*member, decision.pid);
            !status.ok()) {
          Complain("tessera_local: warning: %s\n", status.ToString());
        }
      }
      return true;
    case RestartPolicy::Outcome::kExhausted:
      if (decision.restarts > 0) {
        *why = absl::StrFormat(", after %d restart%s", decision.restarts,
                               decision.restarts == 1 ? "" : "s");
      }
      return false;
    case RestartPolicy::Outcome::kStartFailed:
      *why =
          absl::StrCat("; restarting it failed: ", decision.status.ToString());
      return false;
    case RestartPolicy::Outcome::kNotRestartable:
      if (restarts_.max_restarts() > 0) {
        *why =
            " (a bad command line or configuration, which a restart would "
            "not fix)";
      }
      return false;
    case RestartPolicy::Outcome::kFinished:
      return false;
  }
  return false;
}

int Launcher::Succeed(int code) {
  chief_echo_->Stop();
  Say("tessera_local: coordinator finished; waiting up to %ds for the other "
      "processes to exit\n",
      FLAGS_grace_period_s);
  const absl::Time deadline = absl::Now() + grace_;
  while (group_.num_running() > 0) {
    if (signals_->count() > 0) return Interrupted();
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    std::optional<ChildExit> exit = group_.WaitAny(std::min(kTick, left));
    if (exit.has_value() && !exit->status.success()) {
      Complain(
          "tessera_local: warning: %s %s after the coordinator finished; "
          "see %s\n",
          Describe(*exit), exit->status.ToString(), LogPath(exit->name));
    }
  }
  std::vector<std::string> left_running;
  for (const ProcessGroup::Child& child : group_.children()) {
    if (child.running) left_running.push_back(child.name);
  }
  if (!left_running.empty()) {
    Complain(
        "tessera_local: stopping %s, still running %ds after the "
        "coordinator finished\n",
        absl::StrJoin(left_running, ", "), FLAGS_grace_period_s);
  }
  StopEveryone();
  if (signals_->count() > 0) return Interrupted();
  if (code == kStoppedExitCode) {
    Say("tessera_local: stopped by the operator before the job's end; logs, "
        "metrics and checkpoints in %s\n",
        run_dir_);
    return kStoppedExitCode;
  }
  Say("tessera_local: done; logs and metrics in %s\n", run_dir_);
  return 0;
}

int Launcher::Fail(const ChildExit& dead, absl::string_view why) {
  // Quiet the echo first so the report below is not interleaved with it.
  chief_echo_->Stop();
  Complain("\ntessera_local: %s %s\n", Describe(dead), why);
  const std::string log = LogPath(dead.name);
  std::string tail = TailFile(log, kTailLines);
  if (!tail.empty() && tail.back() != '\n') tail += '\n';
  Complain("---- last %d lines of %s ----\n%s---- end of %s ----\n", kTailLines,
           log, tail, log);
  // Name the other casualties too: when a server dies, the coordinator
  // often follows before we look, and the order helps the diagnosis.
  while (std::optional<ChildExit> other = NextExit(absl::ZeroDuration())) {
    Complain("tessera_local: also %s %s (log %s)\n", Describe(*other),
             other->status.ToString(), LogPath(other->name));
  }
  Complain("tessera_local: stopping all processes\n");
  StopEveryone();
  Complain("tessera_local: failed; logs in %s\n", run_dir_);
  // A bad job (a malformed job file, a bad model description) is the
  // user's to fix, as the coordinator's own exit code says: keep it.
  if (!dead.status.signaled && dead.status.code == kConfigErrorExitCode) {
    return kConfigErrorExitCode;
  }
  return kExitFailure;
}

int Launcher::Interrupted() {
  StopEveryone();
  if (chief_echo_.has_value()) chief_echo_->Stop();
  Complain(
      "tessera_local: interrupted by %s; all processes stopped; logs in "
      "%s\n",
      SignalName(signals_->first()), run_dir_);
  return kExitInterrupted;
}

void Launcher::StopEveryone() {
  // A signal while stopping means "hurry": skip to SIGKILL. Before that, a
  // first signal that caused the stop must not cut it short.
  const int signals_before = signals_->count();
  group_.StopAll(grace_, [this, signals_before] {
    return signals_->count() > signals_before;
  });
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
  tessera::Launcher launcher(std::move(args.coordinator), &signals);
  return launcher.Run();
}
