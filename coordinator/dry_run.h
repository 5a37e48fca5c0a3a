// The coordinator's --dry_run: the plan of a job on a cluster, and every
// check that needs no training and no other process.

#ifndef TESSERA_COORDINATOR_DRY_RUN_H_
#define TESSERA_COORDINATOR_DRY_RUN_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/cluster/cluster_spec.h"
#include "common/model/table_placement.h"
#include "coordinator/variable_plan.h"
#include "proto/job.pb.h"

namespace tessera {

struct DryRunOptions {
  // The mode's note (ModeForCluster), printed when not empty.
  std::string mode_note;
  // Bytes of memory a parameter server may use: a server whose shards
  // and optimizer slots need more gets a warning. 0: this machine's.
  int64_t memory_bytes = 0;
  // Read the first examples and check them against the model; off for a
  // job whose data section is still to be written (tessera_keras import's
  // placeholder), whose model and shards are checked alone.
  bool check_data = true;
  // Hybrid mode: the dense variables stay on the workers (the plan holds
  // the tables' shards only), which the output says with their bytes.
  bool dense_on_workers = false;
  // Each table's placement and why (common/model/table_placement.h),
  // printed as a table when the model has any.
  std::vector<TablePlan> tables;
};

// Prints to `out` the model's summary, where each shard goes (or, without
// parameter servers, that every worker holds every variable) and warnings,
// after reading the first example of the training and test data through
// the workers' reader and checking it against the model
// (data/data_check.h). The data check's error (InvalidArgument or
// NotFound, naming the file) is returned; the plan is printed either way.
absl::Status DryRun(const JobConfig& job, const ClusterSpec& cluster,
                    const VariablePlan& plan, const DryRunOptions& options,
                    FILE* out);

// The memory of this machine, in bytes (0 when unknown).
int64_t MachineMemoryBytes();

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_DRY_RUN_H_
