#include "deploy/local/launcher.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/exit_code.h"
#include "common/rpc/rpc_auth.h"
#include "deploy/build_root.h"
#include "deploy/local/console.h"
#include "deploy/local/free_ports.h"
#include "deploy/local/run_folder.h"

namespace tessera {
namespace {

constexpr int kExitFailure = kExitRetryable;
constexpr int kTailLines = 20;
constexpr char kHost[] = "127.0.0.1";
constexpr char kChiefName[] = "chief";
constexpr char kEvaluatorName[] = "evaluator";

// Why a process that exited kConfigErrorExitCode is not restarted.
constexpr char kNotRestartableWhy[] =
    " (a bad command line or configuration, which a restart would not fix)";

// How often the main loop checks for signals while waiting on children.
constexpr absl::Duration kTick = absl::Milliseconds(100);

// How long a coordinator's non-zero exit is watched for servers that exit
// cleanly right after it (the shutdown it sent before failing), before it
// is restarted.
constexpr absl::Duration kShutdownSettle = absl::Seconds(2);

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

// The flag among `given` (the coordinator's flags given before "--") that
// the coordinator refused as unknown in `output`, as "--name"; nullopt when
// it refused none of them. The coordinator words that refusal as every
// binary does (common/command_line.cc): "unknown command line flag 'NAME'".
std::optional<std::string> UnknownFlagAmong(
    const std::vector<std::string>& given, absl::string_view output) {
  for (absl::string_view arg : given) {
    if (!absl::ConsumePrefix(&arg, "-")) continue;
    absl::ConsumePrefix(&arg, "-");
    const absl::string_view name = arg.substr(0, arg.find('='));
    if (name.empty()) continue;
    if (absl::StrContains(
            output, absl::StrCat("unknown command line flag '", name, "'"))) {
      return absl::StrCat("--", name);
    }
  }
  return std::nullopt;
}

// Why a failed `exit` after `early_exit` (a process that had exited
// cleanly) is not restarted; empty when no process had exited cleanly, or
// `exit` itself is clean.
std::string NotRestartedWhy(const ChildExit& exit,
                            const std::optional<ChildExit>& early_exit) {
  if (!early_exit.has_value() || exit.status.success()) return "";
  // A bad configuration would not be restarted anyway: that, not the
  // clean exit before it (often the shutdown the coordinator sent when
  // it refused the job), is the reason to give.
  return !exit.status.signaled && exit.status.code == kConfigErrorExitCode
             ? std::string(kNotRestartableWhy)
             : absl::StrFormat("; not restarted, since %s had already exited",
                               early_exit->name);
}

}  // namespace

Launcher::Launcher(LauncherOptions options,
                   std::vector<std::string> coordinator_args,
                   SignalWatcher* signals)
    : options_(std::move(options)),
      coordinator_args_(std::move(coordinator_args)),
      signals_(signals),
      grace_(absl::Seconds(options_.grace_period_s)),
      restarts_(&group_, options_.max_restarts) {}

std::string Launcher::Label(const std::string& name) {
  return name == kChiefName ? "coordinator" : name;
}

absl::Status Launcher::Prepare() {
  std::string bin_dir = options_.bin_dir;
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
  if (absl::Status status = PrepareRunDir(); !status.ok()) return status;
  absl::StatusOr<std::vector<std::string>> common_args = CommonArgs();
  if (!common_args.ok()) return common_args.status();
  absl::StatusOr<std::vector<int>> ports =
      PickFreePorts(1 + options_.num_ps + options_.num_workers);
  if (!ports.ok()) return ports.status();
  AddClusterMembers(*ports, ps_bin, worker_bin, chief_bin, *common_args);
  if (options_.evaluator) {
    const std::string evaluator_bin = BinaryUnder(bin_dir, "tessera_evaluator");
    if (absl::Status status = CheckBinaries({evaluator_bin}); !status.ok()) {
      return status;
    }
    AddEvaluator(evaluator_bin);
  }

  cluster_ = nlohmann::json::object();
  for (const ClusterMember& member : members_) {
    // As in TensorFlow, the evaluator is a task outside the cluster.
    if (member.type == "evaluator") continue;
    cluster_[member.type].push_back(member.address);
  }
  return WriteFile(run_dir_ + "/cluster.json",
                   nlohmann::json{{"cluster", cluster_}}.dump(2) + "\n");
}

absl::Status Launcher::PrepareRunDir() {
  absl::StatusOr<std::string> run_dir = MakeRunDir(options_.run_dir);
  if (!run_dir.ok()) return run_dir.status();
  run_dir_ = *run_dir;
  if (absl::Status status = PrepareToken(); !status.ok()) return status;
  std::error_code error;
  std::filesystem::create_directories(run_dir_ + "/pids", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", run_dir_, "/pids: ", error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Launcher::CommonArgs() const {
  // Every process gets the job's token file, and the launcher's TLS
  // flags (checked here, so that a bad file or a key of another
  // certificate fails once, with the command-line exit code, rather than
  // in every process).
  std::vector<std::string> common_args = {
      absl::StrCat("--job_token_file=", token_file_)};
  absl::StatusOr<std::optional<TlsFiles>> tls = LoadTlsFiles(options_.tls);
  if (!tls.ok()) return tls.status();
  if (tls->has_value()) {
    for (const auto& [flag, value] :
         {std::pair<const char*, const std::string*>{"tls_cert",
                                                     &options_.tls.cert},
          {"tls_key", &options_.tls.key},
          {"tls_ca", &options_.tls.ca}}) {
      common_args.push_back(absl::StrCat(
          "--", flag, "=", std::filesystem::absolute(*value).string()));
    }
    if (!options_.tls_target_name_override.empty()) {
      common_args.push_back(absl::StrCat("--tls_target_name_override=",
                                         options_.tls_target_name_override));
    }
  } else if (!options_.tls_target_name_override.empty()) {
    return absl::InvalidArgumentError(
        "--tls_target_name_override needs TLS: --tls_cert, --tls_key and "
        "--tls_ca");
  }
  return common_args;
}

void Launcher::AddClusterMembers(const std::vector<int>& ports,
                                 const std::string& ps_bin,
                                 const std::string& worker_bin,
                                 const std::string& chief_bin,
                                 const std::vector<std::string>& common_args) {
  auto address = [&](int i) { return absl::StrCat(kHost, ":", ports[i]); };
  int next_port = 1;
  std::vector<std::string> ps_args = common_args;
  if (!options_.row_memory_budget.empty()) {
    ps_args.push_back(
        absl::StrCat("--row_memory_budget=", options_.row_memory_budget));
  }
  for (int i = 0; i < options_.num_ps; ++i) {
    members_.push_back({absl::StrCat("ps-", i), "ps", i, address(next_port++),
                        ps_bin, ps_args});
  }
  std::vector<std::string> worker_args = common_args;
  if (!options_.data_plane.empty()) {
    worker_args.push_back(absl::StrCat("--data_plane=", options_.data_plane));
  }
  for (int i = 0; i < options_.num_workers; ++i) {
    members_.push_back({absl::StrCat("worker-", i), "worker", i,
                        address(next_port++), worker_bin, worker_args});
  }
  // The user's coordinator flags come last, so their --checkpoint_dir wins.
  std::vector<std::string> chief_args = common_args;
  chief_args.push_back(absl::StrCat("--run_dir=", run_dir_));
  if (options_.elastic) chief_args.push_back("--remove_lost_workers");
  chief_args.push_back(
      absl::StrCat("--checkpoint_dir=", run_dir_, "/checkpoints"));
  chief_args.insert(chief_args.end(), coordinator_args_.begin(),
                    coordinator_args_.end());
  members_.push_back(
      {kChiefName, "chief", 0, address(0), chief_bin, std::move(chief_args)});
}

void Launcher::AddEvaluator(const std::string& evaluator_bin) {
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

absl::Status Launcher::PrepareToken() {
  if (!options_.job_token_file.empty()) {
    // The user's own token file: checked here so a bad one fails at once
    // rather than in every process.
    absl::StatusOr<std::string> token = LoadJobToken(options_.job_token_file);
    if (!token.ok()) return token.status();
    token_file_ = std::filesystem::absolute(options_.job_token_file).string();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> token = GenerateJobToken();
  if (!token.ok()) return token.status();
  token_file_ = run_dir_ + "/job.token";
  return WriteWithMode(token_file_, *token + "\n", 0600);
}

absl::Status Launcher::WritePidFile(const ClusterMember& member,
                                    pid_t pid) const {
  return WriteWithMode(
      absl::StrCat(run_dir_, "/pids/", member.type, "-", member.index),
      absl::StrCat(pid, "\n"), 0644);
}

const ClusterMember* Launcher::MemberNamed(const std::string& name) const {
  for (const ClusterMember& member : members_) {
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
  for (const ClusterMember& member : members_) {
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

std::optional<int> Launcher::Preflight() {
  const bool dry_run = AsksForDryRun(coordinator_args_);
  const ClusterMember* chief = MemberNamed(kChiefName);
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
  const bool refused =
      !exit->status.signaled && exit->status.code == kConfigErrorExitCode;
  // A flag neither the launcher nor the coordinator knows is the user's
  // typo on the launcher's command line, not a fault the coordinator found
  // in the job.
  const std::optional<std::string> unknown =
      refused ? UnknownFlagAmong(options_.flags_before_separator, output)
              : std::nullopt;
  if (dry_run) {
    if (!unknown.has_value()) {
      std::fwrite(output.data(), 1, output.size(), stdout);
      std::fflush(stdout);
    }
    // A dry run leaves nothing behind but what the user asked to keep.
    if (options_.run_dir.empty()) {
      std::error_code error;
      std::filesystem::remove_all(run_dir_, error);
    }
  }
  if (unknown.has_value()) {
    Complain(
        "tessera_local: unknown flag %s (neither tessera_local's nor the "
        "coordinator's: tessera_local passes the flags it does not know to "
        "the coordinator); nothing was started\n",
        *unknown);
    return kConfigErrorExitCode;
  }
  if (dry_run) {
    if (exit->status.success()) return 0;
    return refused ? kConfigErrorExitCode : kExitFailure;
  }
  if (exit->status.success()) return std::nullopt;
  Complain("%s", output);
  Complain(
      "tessera_local: the coordinator's check of the job %s; nothing was "
      "started (its output is in %s)\n",
      exit->status.ToString(), spec.log_path);
  return refused ? kConfigErrorExitCode : kExitFailure;
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
                                    options_.grace_period_s));
      }
      continue;
    }
    // Once a process has exited cleanly the coordinator is shutting the
    // cluster down (it does so when it fails, too), and a restarted
    // process would only meet an emptying cluster.
    if (exit->name == kEvaluatorName) {
      ReportEvaluatorExit(*exit);
      continue;
    }
    if (!early_exit.has_value() && WorkerLeft(*exit)) continue;
    const bool restartable = !early_exit.has_value();
    std::string why = NotRestartedWhy(*exit, early_exit);
    if (exit->name == kChiefName) {
      if (std::optional<int> code = ChiefExited(*exit, restartable, why)) {
        return *code;
      }
      continue;
    }
    if (!exit->status.success()) {
      if (restartable && TryRestart(*exit, &why)) continue;
      if (early_exit.has_value()) {
        // A process had already exited cleanly: the coordinator is shutting
        // the cluster down, and a task lost now costs the job nothing if
        // the coordinator finishes; its exit decides.
        Say("tessera_local: %s %s while the cluster shut down; waiting for "
            "the coordinator\n",
            exit->name, exit->status.ToString());
        continue;
      }
      return Fail(*exit, absl::StrCat(exit->status.ToString(),
                                      " before the coordinator finished", why));
    }
    if (!early_exit.has_value()) {
      early_exit = exit;
      chief_deadline = absl::Now() + grace_;
    }
  }
}

void Launcher::ReportEvaluatorExit(const ChildExit& exit) {
  // The evaluator follows training and never holds it up.
  if (exit.status.success()) {
    Say("tessera_local: the evaluator finished; see %s\n", LogPath(exit.name));
  } else {
    Complain(
        "tessera_local: warning: the evaluator %s; training goes on "
        "without it (see %s)\n",
        exit.status.ToString(), LogPath(exit.name));
  }
}

std::optional<int> Launcher::ChiefExited(const ChildExit& exit,
                                         bool restartable, std::string why) {
  if (exit.status.success()) return Succeed();
  if (!exit.status.signaled && exit.status.code == kStoppedExitCode) {
    return Succeed(kStoppedExitCode);
  }
  // The servers' clean exits may trail a coordinator that shut them
  // down and then exited by itself; one killed by a signal did not.
  if (restartable && !exit.status.signaled && restarts_.WouldRestart(exit)) {
    if (std::optional<ChildExit> clean = AwaitCleanExit(kShutdownSettle)) {
      restartable = false;
      why = absl::StrFormat(
          "; not restarted, since %s exited cleanly right after it (the "
          "coordinator shut the cluster down)",
          clean->name);
    }
  }
  if (restartable && TryRestart(exit, &why)) return std::nullopt;
  return Fail(exit, absl::StrCat(exit.status.ToString(), why));
}

bool Launcher::WorkerLeft(const ChildExit& exit) {
  const ClusterMember* member = MemberNamed(exit.name);
  if (!options_.elastic || member == nullptr || member->type != "worker") {
    return false;
  }
  if (exit.status.success()) {
    Say("tessera_local: %s exited cleanly (it drained, or the job is "
        "ending)\n",
        member->Label());
    return true;
  }
  std::string why;
  if (TryRestart(exit, &why)) return true;
  Say("tessera_local: %s %s%s; the job goes on without it (the coordinator "
      "removes it after --worker_recovery_timeout_s)\n",
      member->Label(), exit.status.ToString(), why);
  return true;
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
  const ClusterMember* member = MemberNamed(exit.name);
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
      if (restarts_.max_restarts() > 0) *why = kNotRestartableWhy;
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
      options_.grace_period_s);
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
        absl::StrJoin(left_running, ", "), options_.grace_period_s);
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

}  // namespace tessera
