// Cluster resolution inside a Slurm job step, as TensorFlow's
// SlurmClusterResolver does it (rank -> job, host, port, GPUs), without its
// known faults: host names with several bracket groups and zero padding,
// Slurm's node order rather than string order (n9 before n10), the cyclic
// and plane distributions, steps without GPUs, and GPUs Slurm already bound
// to each task.
//
// Contract:
//  - Reads only the environment passed in (std::getenv by default), so
//    tests need no Slurm; writes nothing. The caller sets
//    CUDA_VISIBLE_DEVICES from the result (see set_cuda_visible_devices) if
//    it wants TF's auto_set_gpu.
//  - Every process of a step computes the same cluster from the same
//    variables; only the task and its GPUs differ per rank.
//  - Errors: FailedPrecondition when a required SLURM_* variable is missing
//    ("SLURM_X is not set: not running inside a Slurm step (use srun)") or
//    when Slurm placed tasks in a way this code cannot map (it never returns
//    a wrong mapping); InvalidArgument naming the variable or option and its
//    value for everything malformed or inconsistent.
//  - Thread-safe if `getenv` is.
//
// Variables read. Required: SLURM_PROCID (this task's rank),
// SLURM_STEP_NODELIST (the step's nodes, in Slurm's order),
// SLURM_STEP_TASKS_PER_NODE (tasks on each of those nodes),
// SLURM_STEP_NUM_TASKS (their sum, cross-checked; at most kMaxExpandedHosts,
// checked before anything is sized by it). Optional:
// SLURM_DISTRIBUTION (unset means block, as srun without -m),
// SLURM_DIST_PLANESIZE (with SLURM_DISTRIBUTION=plane), CUDA_VISIBLE_DEVICES,
// SLURMD_TRES_BIND (see GPUs below), and SLURM_NODEID / SLURM_LOCALID, which,
// when set, must agree with the computed placement of this rank (a check
// against layouts Slurm makes in ways not modelled here; a disagreement is
// FailedPrecondition).
//
// Rank -> node. Slurm's task layout for the node-level part of
// SLURM_DISTRIBUTION (the text before ':'; ",pack"/",nopack" and "*" are
// accepted), given the tasks per node:
//   block (also unset, "*", "pack", "nopack"): consecutive ranks fill node 0,
//       then node 1, ...;
//   cyclic: rank r goes to the next node in node order that still has room,
//       one rank per node per round;
//   plane (SLURM_DIST_PLANESIZE=N, or "plane=N"): as cyclic, but up to N
//       consecutive ranks per node per round.
// "arbitrary" (srun -w with a host file, SLURM_HOSTFILE) and anything else
// are FailedPrecondition suggesting --distribution=block or cyclic.
//
// Rank -> job. Job names sorted (chief < evaluator < ps < worker), each taking
// the next `count` ranks: with {chief:1, ps:2, worker:4}, rank 0 is the
// chief, ranks 1-2 the ps tasks, ranks 3-6 the workers. The sum of the counts
// must equal SLURM_STEP_NUM_TASKS. Within a job, tasks keep rank order, so
// task index = rank - first rank of the job. The port of a task is
// port_base + its local index on its node (0 for its node's lowest rank).
//
// GPUs. Let V be the entries of CUDA_VISIBLE_DEVICES (none when it is unset,
// empty, "NoDevFiles" (Slurm's value for none) or "-1"), k = |V|,
// M = the most tasks any node of the step runs, L = this task's local index.
//   gpus_per_node N = options.gpus_per_node if >= 0, else k.
//   gpus_per_task g = options.gpus_per_task if >= 0, else N / M (TF's).
// gpus_per_task = 0 means no GPU for any task, whatever is visible.
// Otherwise CUDA_VISIBLE_DEVICES is read in one of two ways:
//   Task view: V is already this task's own share; the task keeps V as it is
//       and g = k. Chosen when
//         - Slurm says it bound GPUs per task: SLURMD_TRES_BIND names a gpu
//           binding of type per_task, single, map_gpu or mask_gpu (srun
//           --gpus-per-task binds per_task by default; --gpu-bind=...). If
//           gpus_per_task is given it must equal k;
//         - or, without that variable, V is too short to be the node's list:
//           gpus_per_node given and 0 < k < N (k must then equal g);
//           gpus_per_task given without gpus_per_node and k == g < M*g; or
//           neither given and 0 < k < M (e.g. one GPU per task: TF divided
//           to 0 GPUs per task and crashed, #56894, or, given gpus_per_node,
//           renumbered to indices that do not exist).
//   Node view (otherwise): V lists the node's GPUs, to be split. The task
//       gets entries V[L*g], ..., V[L*g+g-1], copied as written (indices,
//       UUIDs or MIG names; never renumbered), or "" when g is 0 (a CPU-only
//       step, or gpus_per_node given smaller than M). When the variable is
//       unset, V stands for 0..N-1. Requires M*g <= N.
// Inconsistent numbers (k > N given; M*g > N; a task view whose k differs
// from a given gpus_per_task) are InvalidArgument naming k, N, g and M. No GPU
// index is ever invented: every entry handed out is one of V, or one of
// 0..N-1 when the variable is unset and the caller said the node has N.
// Like TF, every task gets GPUs, the ps and chief included; pass
// gpus_per_task=0 to a binary that should have none.
#ifndef TESSERA_COMMON_SLURM_CLUSTER_RESOLVER_H_
#define TESSERA_COMMON_SLURM_CLUSTER_RESOLVER_H_

#include <cstdlib>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster/cluster_spec.h"

namespace tessera {

struct SlurmOptions {
  // Job name -> number of tasks, e.g. {chief:1, ps:2, worker:4}. Empty means
  // every task of the step is a worker, as TF's jobs=None.
  std::map<std::string, int> jobs;
  // Port of the lowest rank on each node; the others count up from it.
  int port_base = 8888;
  // GPUs per task; -1: gpus_per_node / (most tasks on one node).
  int gpus_per_task = -1;
  // GPUs per node; -1: the number of entries of CUDA_VISIBLE_DEVICES.
  int gpus_per_node = -1;
};

// Parses "chief:1,ps:2,worker:4" (spaces around parts allowed). Job names
// must be chief, evaluator, ps or worker, each at most once, with a count of
// at least 1. InvalidArgument quoting the text and naming the bad part.
absl::StatusOr<std::map<std::string, int>> ParseJobs(absl::string_view text);

struct SlurmResolution {
  // The whole cluster, with this process's task.
  ClusterSpec cluster;
  // CUDA_VISIBLE_DEVICES for this task, e.g. "2,3"; "" when it gets no GPU.
  std::string cuda_visible_devices;
  // GPUs each task gets (TF's num_accelerators()["GPU"]).
  int gpus_per_task = 0;
  // Whether the caller should set CUDA_VISIBLE_DEVICES to
  // cuda_visible_devices (TF's auto_set_gpu): true when the task gets GPUs,
  // or gets none and the step said which GPUs there are (CUDA_VISIBLE_DEVICES
  // was set, gpus_per_node was given, or gpus_per_task is 0). False leaves
  // the variable as it is, so GPUs nobody mentioned (e.g. srun
  // --gpu-bind=none) are not hidden.
  bool set_cuda_visible_devices = false;
};

// Resolves this process's cluster from the Slurm step's environment as
// described at the top of this file. `getenv` returns nullptr for unset
// variables.
absl::StatusOr<SlurmResolution> ResolveSlurmCluster(
    const SlurmOptions& options,
    const std::function<const char*(const char*)>& getenv = std::getenv);

}  // namespace tessera

#endif  // TESSERA_COMMON_SLURM_CLUSTER_RESOLVER_H_
