#ifndef TESSERA_COORDINATOR_JOB_CONFIG_H_
#define TESSERA_COORDINATOR_JOB_CONFIG_H_

#include "absl/status/status.h"
#include "proto/job.pb.h"

namespace tessera {

// Checks everything the coordinator can check before contacting the
// cluster; errors name the field. (JobConfigFromFlags, coordinator/
// job_flags.h, makes the job from the command line.)
absl::Status ValidateJobConfig(const JobConfig& job);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_JOB_CONFIG_H_
