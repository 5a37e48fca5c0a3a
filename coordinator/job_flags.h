// The coordinator's job flags (--job_file, --epochs, --model, ...) and the
// job they describe. A flag library: only tessera_coordinator's main (and
// its tests) link it, so no library carries these flags.
#ifndef TESSERA_COORDINATOR_JOB_FLAGS_H_
#define TESSERA_COORDINATOR_JOB_FLAGS_H_

#include "absl/status/statusor.h"
#include "common/job_file.h"
#include "gflags/gflags.h"
#include "proto/job.pb.h"

DECLARE_string(job_file);
DECLARE_int32(epochs);
DECLARE_int64(steps_per_epoch);
DECLARE_int32(batch_size);
DECLARE_double(learning_rate);
DECLARE_string(optimizer);
DECLARE_string(partitioner);
DECLARE_int64(num_shards);
DECLARE_uint64(seed);

namespace tessera {

// The job as the command line describes it: the flags' defaults, overlaid
// by --job_file if given (fields it sets), overlaid by every flag set
// explicitly on the command line.
absl::StatusOr<JobConfig> JobConfigFromFlags();

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_JOB_FLAGS_H_
