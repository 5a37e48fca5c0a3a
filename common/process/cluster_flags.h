// Command-line flags that tell every Tessera binary (ps server, worker,
// coordinator) which cluster it belongs to, and their resolution into a
// ClusterSpec.
//
// Contract: this file is the only place that reads these flags, so
// ClusterSpec stays testable without them. ResolveClusterSpec picks exactly
// one source, in this order:
//   1. --chief_host/--ps_hosts/--worker_hosts, if any is non-empty (then
//      --task_type is required and --task_index names this process);
//   2. --tf_config (TF_CONFIG JSON, or @path to a file holding it);
//   3. --slurm_jobs, if non-empty: this process is one task of a Slurm job
//      step (srun), resolved from the step's SLURM_* variables with
//      --port_base, --gpus_per_task and --gpus_per_node as
//      common/cluster/slurm_cluster_resolver.h describes; CUDA_VISIBLE_DEVICES
//      is then set to this task's GPUs (TF's auto_set_gpu);
//   4. the TF_CONFIG environment variable.
// Lower-priority sources are ignored, not merged. Slurm is never chosen
// silently: inside a step with no source given, the NotFound error says to
// pass --slurm_jobs.
#ifndef TESSERA_COMMON_CLUSTER_FLAGS_H_
#define TESSERA_COMMON_CLUSTER_FLAGS_H_

#include <gflags/gflags_declare.h>

#include "absl/status/statusor.h"
#include "common/cluster/cluster_spec.h"

DECLARE_string(tf_config);
DECLARE_string(chief_host);
DECLARE_string(ps_hosts);
DECLARE_string(worker_hosts);
DECLARE_string(task_type);
DECLARE_int32(task_index);
DECLARE_string(slurm_jobs);
DECLARE_int32(port_base);
DECLARE_int32(gpus_per_task);
DECLARE_int32(gpus_per_node);
DECLARE_bool(print_cluster);

namespace tessera {

// Builds the cluster from the flags/environment as described above. Errors
// keep the ClusterSpec status code and say which source was used; NotFound
// when no source is given, listing the ways to give one.
absl::StatusOr<ClusterSpec> ResolveClusterSpec();

// With --print_cluster, prints `cluster` as one line of TF_CONFIG JSON and a
// line naming this task, its address and its CUDA_VISIBLE_DEVICES to stdout,
// and returns true: main then exits 0 without starting anything. Returns
// false (printing nothing) without the flag.
bool PrintClusterIfRequested(const ClusterSpec& cluster);

}  // namespace tessera

#endif  // TESSERA_COMMON_CLUSTER_FLAGS_H_
