#ifndef TESSERA_COORDINATOR_JOB_CONFIG_H_
#define TESSERA_COORDINATOR_JOB_CONFIG_H_

#include "absl/status/status.h"
#include "common/training_mode.h"
#include "proto/job.pb.h"

namespace tessera {

// Checks everything the coordinator can check before contacting the
// cluster; errors name the field. (JobConfigFromFlags, coordinator/
// job_flags.h, makes the job from the command line.)
absl::Status ValidateJobConfig(const JobConfig& job);

// The checks that need the cluster's workers, made before any process is
// contacted (the coordinator's --dry_run, and so tessera_local's check
// before it starts anything) and again by TrainingJob: in a lockstep mode
// (`mode`, as the cluster gives it) the global batch splits evenly over
// `num_workers`; and sync's backup workers are fewer than the workers
// (`remove_lost_workers` is taken in every mode: a mirrored or hybrid
// replica that is removed leaves the all-reduce ring). InvalidArgument
// naming the flag otherwise.
absl::Status ValidateJobForWorkers(const JobConfig& job,
                                   const TrainingMode& mode, int num_workers,
                                   bool remove_lost_workers);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_JOB_CONFIG_H_
