#include "common/process/cluster_flags.h"

#include <gflags/gflags.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/cluster/slurm_cluster_resolver.h"

DEFINE_string(tf_config, "",
              "TF_CONFIG JSON, or @path to a file holding it; overrides the "
              "TF_CONFIG environment variable");
DEFINE_string(chief_host, "",
              "host:port of the chief (coordinator); with --ps_hosts and "
              "--worker_hosts, overrides --tf_config and TF_CONFIG");
DEFINE_string(ps_hosts, "",
              "Comma-separated host:port list of the parameter servers");
DEFINE_string(worker_hosts, "",
              "Comma-separated host:port list of the workers");
DEFINE_string(task_type, "",
              "This process's job (chief, worker, ps or evaluator); required "
              "with --chief_host/--ps_hosts/--worker_hosts");
DEFINE_int32(task_index, 0,
             "This process's index within --task_type; used with "
             "--chief_host/--ps_hosts/--worker_hosts");
DEFINE_string(slurm_jobs, "",
              "Inside a Slurm job step (srun): take the cluster from Slurm, "
              "with this many tasks of each job, e.g. chief:1,ps:2,worker:4 "
              "(jobs take ranks in name order: rank 0 is the chief, ranks 1-2 "
              "the ps tasks, ranks 3-6 the workers); must add up to the "
              "step's number of tasks");
DEFINE_int32(port_base, 8888,
             "With --slurm_jobs: port of the lowest rank on each node; the "
             "node's next ranks count up from it");
DEFINE_int32(gpus_per_task, -1,
             "With --slurm_jobs: GPUs each task gets (0: none); -1: GPUs per "
             "node / most tasks on a node, or what Slurm bound to the task");
DEFINE_int32(gpus_per_node, -1,
             "With --slurm_jobs: GPUs per node; -1: the entries of "
             "CUDA_VISIBLE_DEVICES");
DEFINE_bool(print_cluster, false,
            "Print the resolved cluster as TF_CONFIG JSON, this task and its "
            "CUDA_VISIBLE_DEVICES, then exit 0 without starting anything");

namespace tessera {
namespace {

constexpr absl::string_view kHostFlags =
    "--chief_host/--ps_hosts/--worker_hosts";

// Keeps the code (NotFound for a missing file stays NotFound) and says which
// source the message came from.
absl::Status WithContext(const absl::Status& status,
                         absl::string_view context) {
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

// Splits "a:1, b:2," into {"a:1", "b:2"}: spaces after commas and a trailing
// comma are common in hand-written command lines and carry no meaning.
// An empty entry inside the list ("a,,b") is an error: dropping it would
// shift every later task's index, so task 2 would dial the host meant for
// task 3. A trailing comma shifts nothing and is allowed.
absl::StatusOr<std::vector<std::string>> SplitHosts(absl::string_view name,
                                                    const std::string& flag) {
  std::vector<std::string> hosts;
  const std::vector<absl::string_view> parts = absl::StrSplit(flag, ',');
  for (size_t i = 0; i < parts.size(); ++i) {
    const absl::string_view host = absl::StripAsciiWhitespace(parts[i]);
    if (host.empty() && i + 1 == parts.size()) break;
    if (host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, "=", flag, ": entry ", hosts.size() + 1,
                       " is empty (one host:port per task, comma-separated)"));
    }
    hosts.emplace_back(host);
  }
  return hosts;
}

absl::StatusOr<ClusterSpec> FromHostFlags() {
  if (FLAGS_task_type.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--task_type is required when ", kHostFlags, " are given"));
  }
  std::map<std::string, std::vector<std::string>> jobs;
  // An unset flag means "no such job", not an empty job, which would fail
  // validation with a less helpful message.
  for (const auto& [job, name, flag] :
       {std::tuple<const char*, const char*, const std::string&>{
            "chief", "chief_host", FLAGS_chief_host},
        {"ps", "ps_hosts", FLAGS_ps_hosts},
        {"worker", "worker_hosts", FLAGS_worker_hosts}}) {
    if (flag.empty()) continue;
    absl::StatusOr<std::vector<std::string>> hosts = SplitHosts(name, flag);
    if (!hosts.ok()) return hosts.status();
    jobs[job] = *std::move(hosts);
  }
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromParts(
      std::move(jobs), TaskId{FLAGS_task_type, FLAGS_task_index});
  if (!spec.ok()) {
    return WithContext(spec.status(),
                       absl::StrCat(kHostFlags, "/--task_type/--task_index"));
  }
  return spec;
}

absl::StatusOr<ClusterSpec> FromSlurm() {
  absl::StatusOr<std::map<std::string, int>> jobs = ParseJobs(FLAGS_slurm_jobs);
  if (!jobs.ok()) return WithContext(jobs.status(), "--slurm_jobs");
  SlurmOptions options;
  options.jobs = *std::move(jobs);
  options.port_base = FLAGS_port_base;
  options.gpus_per_task = FLAGS_gpus_per_task;
  options.gpus_per_node = FLAGS_gpus_per_node;
  absl::StatusOr<SlurmResolution> resolved = ResolveSlurmCluster(options);
  if (!resolved.ok()) {
    return WithContext(resolved.status(),
                       absl::StrCat("--slurm_jobs=", FLAGS_slurm_jobs));
  }
  // Before any CUDA call, so that this task sees only its own GPUs.
  if (resolved->set_cuda_visible_devices) {
    setenv("CUDA_VISIBLE_DEVICES", resolved->cuda_visible_devices.c_str(), 1);
  }
  return std::move(resolved->cluster);
}

absl::StatusOr<ClusterSpec> FromTfConfigFlag() {
  absl::string_view value = FLAGS_tf_config;
  absl::StatusOr<ClusterSpec> spec =
      absl::ConsumePrefix(&value, "@")
          ? ClusterSpec::FromFile(std::string(value))
          : ClusterSpec::FromTfConfigJson(
                std::string_view(value.data(), value.size()));
  if (!spec.ok()) return WithContext(spec.status(), "--tf_config");
  return spec;
}

}  // namespace

absl::StatusOr<ClusterSpec> ResolveClusterSpec() {
  if (!FLAGS_chief_host.empty() || !FLAGS_ps_hosts.empty() ||
      !FLAGS_worker_hosts.empty()) {
    return FromHostFlags();
  }
  if (!FLAGS_tf_config.empty()) return FromTfConfigFlag();
  if (!FLAGS_slurm_jobs.empty()) return FromSlurm();
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromEnvironment();
  if (absl::IsNotFound(spec.status())) {
    const char* rank = std::getenv("SLURM_PROCID");
    return absl::NotFoundError(absl::StrCat(
        "no cluster given; use one of: ", kHostFlags,
        " with --task_type and --task_index; --tf_config=<JSON or @file>; "
        "--slurm_jobs=<e.g. chief:1,ps:2,worker:4> inside a Slurm step; or "
        "the TF_CONFIG environment variable (",
        spec.status().message(), ")",
        rank == nullptr ? ""
                        : absl::StrCat("; this is rank ", rank,
                                       " of a Slurm job (SLURM_PROCID), so "
                                       "--slurm_jobs is probably missing")));
  }
  return spec;
}

bool PrintClusterIfRequested(const ClusterSpec& cluster) {
  if (!FLAGS_print_cluster) return false;
  const char* gpus = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string shown = gpus == nullptr ? "(unset)"
                            : *gpus == '\0' ? "\"\" (no GPU)"
                                            : std::string(gpus);
  std::printf("%s\ntask=%s:%d address=%s CUDA_VISIBLE_DEVICES=%s\n",
              cluster.ToTfConfigJson().c_str(), cluster.task().type.c_str(),
              cluster.task().index, cluster.own_address().c_str(),
              shown.c_str());
  std::fflush(stdout);
  return true;
}

}  // namespace tessera
