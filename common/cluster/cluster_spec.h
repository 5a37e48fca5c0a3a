// ClusterSpec: the set of processes in a training cluster and which of them
// this process is, in the shape TensorFlow's TF_CONFIG gives it.
//
// Contract:
//  - A ClusterSpec only exists in a validated state; every factory runs the
//    same checks and returns InvalidArgument naming the offending field with a
//    JSON-path-like name ("cluster.ps[1]", "task.index") and its value.
//  - Validation follows TensorFlow's multi_worker_util._validate_cluster_spec
//    (job names chief/worker/ps/evaluator, at most one chief and one
//    evaluator, task.index < number of tasks of task.type, the evaluator may
//    be absent from the cluster) and goes further: every address is host:port
//    with a port in 1..65535 (IPv6 as [addr]:port), no address appears twice
//    (host compared case-insensitively), and no job list is empty.
//  - Requirements of a particular strategy (e.g. parameter-server training
//    needing ps tasks) are checked separately, so other modes can reuse this.
//  - Immutable after construction; safe to share across threads for reading.
#ifndef TESSERA_COMMON_CLUSTER_SPEC_H_
#define TESSERA_COMMON_CLUSTER_SPEC_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// Identifies one process of the cluster, e.g. {"worker", 1}.
struct TaskId {
  std::string type;
  int index = 0;
};

class ClusterSpec {
 public:
  // Job name -> ordered "host:port" addresses. std::less<> allows lookups by
  // string_view; the sorted order keeps ToTfConfigJson/DebugString stable.
  using JobMap = std::map<std::string, std::vector<std::string>, std::less<>>;

  // Parses and validates TF_CONFIG JSON, e.g.
  //   {"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222"],
  //                "ps": ["h2:2222"]},
  //    "task": {"type": "worker", "index": 0}, "rpc_layer": "grpc"}
  // "rpc_layer" is optional (default "grpc"); unknown top-level keys (e.g.
  // "environment", "session_master") are ignored as TensorFlow does.
  // task.index may be omitted only when it can only be 0 (the task's job has
  // at most one task), so a worker missing its index cannot silently
  // impersonate worker 0.
  static absl::StatusOr<ClusterSpec> FromTfConfigJson(std::string_view json);

  // Reads the TF_CONFIG environment variable. NotFound if unset or blank.
  static absl::StatusOr<ClusterSpec> FromEnvironment();

  // Reads TF_CONFIG JSON from `path`. NotFound if the file does not exist,
  // InvalidArgument if it is larger than 16 MiB (e.g. /dev/zero given by
  // mistake);
  // errors name the path.
  static absl::StatusOr<ClusterSpec> FromFile(const std::string& path);

  // Builds a spec from already-split parts (e.g. command-line flags) with the
  // same validation as FromTfConfigJson; rpc_layer is "grpc".
  static absl::StatusOr<ClusterSpec> FromParts(
      std::map<std::string, std::vector<std::string>> jobs, TaskId task);

  // Addresses of `job` in index order; empty if the job is absent.
  const std::vector<std::string>& tasks(std::string_view job) const;
  int num_tasks(std::string_view job) const;
  const JobMap& jobs() const { return jobs_; }
  const TaskId& task() const { return task_; }
  const std::string& rpc_layer() const { return rpc_layer_; }

  // Address of task `index` of `job`; OutOfRange naming both otherwise.
  absl::StatusOr<std::string> address(std::string_view job, int index) const;

  // Address of this process, or "" when it is not in the cluster (only
  // possible for an evaluator).
  std::string own_address() const;

  // Canonical TF_CONFIG JSON; FromTfConfigJson(ToTfConfigJson()) yields an
  // equal spec.
  std::string ToTfConfigJson() const;

  // One line for logs, e.g.
  // "task=worker:1 rpc_layer=grpc chief=[h0:2222] ps=[h3:2222,h4:2222] ...".
  std::string DebugString() const;

  // Checks what parameter-server training needs, as TensorFlow's
  // ParameterServerStrategy does: exactly one chief (the coordinator), at
  // least one worker and at least one ps. InvalidArgument names the job.
  // An evaluator is allowed, but it is not a training task: the coordinator
  // must not wait for it (TensorFlow hangs when it does, issue #46169).
  absl::Status ValidateForParameterServerTraining() const;

 private:
  ClusterSpec(JobMap jobs, TaskId task, std::string rpc_layer);

  // Parses TF_CONFIG text; `source` prefixes every error ("TF_CONFIG",
  // "TF_CONFIG file /x").
  static absl::StatusOr<ClusterSpec> Parse(absl::string_view json,
                                           absl::string_view source);
  // Checks job names, addresses and the task; shared by every factory.
  static absl::StatusOr<ClusterSpec> Build(absl::string_view source,
                                           JobMap jobs, TaskId task,
                                           std::string rpc_layer);

  JobMap jobs_;
  TaskId task_;
  std::string rpc_layer_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_CLUSTER_SPEC_H_
