#include "deploy/local/join_launcher.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/exit_code.h"
#include "common/rpc/rpc_auth.h"
#include "deploy/build_root.h"
#include "deploy/local/console.h"
#include "deploy/local/free_ports.h"
#include "deploy/local/log_tail.h"
#include "deploy/local/run_folder.h"
#include "deploy/local/running_job.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

constexpr char kHost[] = "127.0.0.1";
constexpr absl::Duration kTick = absl::Milliseconds(100);
constexpr int kTailLines = 20;

// The address of the coordinator of the running job in `run_dir`, from
// the cluster.json tessera_local wrote there.
absl::StatusOr<std::string> ChiefOfRun(const std::string& run_dir) {
  const std::string cluster_path = run_dir + "/cluster.json";
  std::ifstream in(cluster_path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("--join: ", cluster_path, " cannot be read: is ", run_dir,
                     " the run folder of a running tessera_local job?"));
  }
  const std::string text(std::istreambuf_iterator<char>(in), {});
  const nlohmann::json cluster = nlohmann::json::parse(text, nullptr, false);
  if (cluster.is_discarded() || !cluster.contains("cluster") ||
      !cluster["cluster"].contains("chief") ||
      !cluster["cluster"]["chief"].is_array() ||
      cluster["cluster"]["chief"].empty() ||
      !cluster["cluster"]["chief"][0].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--join: ", cluster_path, " names no coordinator (cluster.chief)"));
  }
  return cluster["cluster"]["chief"][0].get<std::string>();
}

// A joining worker's flags, but its own address.
std::vector<std::string> JoinArgs(const LauncherOptions& options,
                                  const std::string& token_file,
                                  const std::string& chief) {
  std::vector<std::string> args = {
      absl::StrCat("--job_token_file=",
                   std::filesystem::absolute(token_file).string()),
      absl::StrCat("--join=", chief)};
  if (!options.tls.cert.empty()) {
    args.push_back(absl::StrCat(
        "--tls_cert=", std::filesystem::absolute(options.tls.cert).string()));
    args.push_back(absl::StrCat(
        "--tls_key=", std::filesystem::absolute(options.tls.key).string()));
    args.push_back(absl::StrCat(
        "--tls_ca=", std::filesystem::absolute(options.tls.ca).string()));
  }
  if (!options.tls_target_name_override.empty()) {
    args.push_back(absl::StrCat("--tls_target_name_override=",
                                options.tls_target_name_override));
  }
  if (!options.data_plane.empty()) {
    args.push_back(absl::StrCat("--data_plane=", options.data_plane));
  }
  return args;
}

}  // namespace

JoinLauncher::JoinLauncher(LauncherOptions options, std::string run_dir,
                           SignalWatcher* signals)
    : options_(std::move(options)),
      run_dir_(std::move(run_dir)),
      signals_(signals) {}

absl::Status JoinLauncher::StartWorkers() {
  // The running job: its coordinator's address and its token.
  absl::StatusOr<std::string> chief_address = ChiefOfRun(run_dir_);
  if (!chief_address.ok()) return chief_address.status();
  const std::string& chief = *chief_address;
  // Before anything is started or written into the folder: a job that
  // ended has no coordinator to take the workers, which would wait for one
  // in silence.
  if (absl::Status s = CheckJobRunning(run_dir_); !s.ok()) return s;
  const std::string token_file = options_.job_token_file.empty()
                                     ? run_dir_ + "/job.token"
                                     : options_.job_token_file;
  if (absl::StatusOr<std::string> token = LoadJobToken(token_file);
      !token.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--join: the job's token: ", token.status().message()));
  }
  std::string bin_dir = options_.bin_dir;
  if (bin_dir.empty()) {
    absl::StatusOr<std::string> inferred = BuildRootOfThisLauncher();
    if (!inferred.ok()) return inferred.status();
    bin_dir = *inferred;
  }
  const std::string worker_bin = BinaryUnder(bin_dir, "tessera_worker");
  if (absl::Status s = CheckBinaries({worker_bin}); !s.ok()) return s;

  const std::vector<std::string> args = JoinArgs(options_, token_file, chief);
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(options_.num_workers);
  if (!ports.ok()) return ports.status();
  std::error_code error;
  std::filesystem::create_directories(run_dir_ + "/pids", error);
  const bool set_glog = std::getenv("GLOG_logtostderr") == nullptr &&
                        std::getenv("GLOG_log_dir") == nullptr;
  int n = 0;  // the next free joined-N
  Say("tessera_local: joining the job of %s (coordinator %s)\n", run_dir_,
      chief);
  for (int k = 0; k < options_.num_workers; ++k) {
    while (std::filesystem::exists(
        absl::StrCat(run_dir_, "/joined-", n, ".log"))) {
      ++n;
    }
    ChildSpec spec;
    spec.name = absl::StrCat("joined-", n);
    spec.binary = worker_bin;
    spec.args = args;
    const std::string address = absl::StrCat(kHost, ":", (*ports)[k]);
    spec.args.push_back(absl::StrCat("--join_address=", address));
    if (set_glog) spec.env.emplace_back("GLOG_logtostderr", "1");
    spec.log_path = absl::StrCat(run_dir_, "/", spec.name, ".log");
    absl::StatusOr<pid_t> pid = group_.Start(spec);
    if (!pid.ok()) return pid.status();
    if (absl::Status s =
            WriteWithMode(absl::StrCat(run_dir_, "/pids/", spec.name),
                          absl::StrCat(*pid, "\n"), 0644);
        !s.ok()) {
      return s;
    }
    Say("  %-10s %-21s pid %-8d log %s\n", spec.name, address, *pid,
        spec.log_path);
    ++n;
  }
  return absl::OkStatus();
}

int JoinLauncher::Run() {
  if (options_.num_workers < 1) {
    Complain("tessera_local: --join needs --num_workers >= 1\n");
    return kExitUserError;
  }
  if (absl::Status s = StartWorkers(); !s.ok()) {
    Complain("tessera_local: %s\n", s.message());
    group_.StopAll(absl::Seconds(options_.grace_period_s));
    return ExitCodeFor(s);
  }
  return Supervise();
}

int JoinLauncher::Supervise() {
  int code = 0;
  while (group_.num_running() > 0) {
    if (signals_->count() > 0) {
      group_.StopAll(absl::Seconds(options_.grace_period_s));
      Complain("tessera_local: interrupted; the joined workers stopped\n");
      return kExitInterrupted;
    }
    std::optional<ChildExit> exit = group_.WaitAny(kTick);
    if (!exit.has_value()) continue;
    if (exit->status.success()) {
      Say("tessera_local: %s exited (the job ended, or it drained)\n",
          exit->name);
      continue;
    }
    const std::string log = absl::StrCat(run_dir_, "/", exit->name, ".log");
    std::string tail = TailFile(log, kTailLines);
    if (!tail.empty() && tail.back() != '\n') tail += '\n';
    Complain(
        "tessera_local: %s %s; not restarted\n---- last %d lines of %s "
        "----\n%s---- end ----\n",
        exit->name, exit->status.ToString(), kTailLines, log, tail);
    const int its =
        !exit->status.signaled && exit->status.code == kExitUserError
            ? kExitUserError
            : kExitRetryable;
    if (code != kExitUserError) code = its;
  }
  if (code == 0) Say("tessera_local: every joined worker exited cleanly\n");
  return code;
}

}  // namespace tessera
