#ifndef TESSERA_COORDINATOR_STEP_FAILURES_H_
#define TESSERA_COORDINATOR_STEP_FAILURES_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/schedule/step_queue.h"

namespace tessera {

// What a step that failed becomes: the words and the retry rule that the
// ClusterCoordinator applies to it.

// The error of a step cancelled because the job's error came first.
absl::Status CancelledAfterError(int64_t step);

// Replicas in lockstep: step `step` failed on `worker` with `status`, so
// its replica missed a step the others made.
absl::Status ReplicaLostError(int64_t step, int worker,
                              const absl::Status& status);

// For step *p, which failed with `status` on `worker` while the worker
// still answers: the pause before it runs again (logged), or nullopt when
// the failure is the job's error: not UNAVAILABLE or DEADLINE_EXCEEDED, or
// failing for `retry_timeout` since its first failure (*p keeps that time
// and its backoff).
std::optional<absl::Duration> RetryPause(int worker, const absl::Status& status,
                                         absl::Duration retry_timeout,
                                         QueuedStep* p);

}  // namespace tessera

#endif  // TESSERA_COORDINATOR_STEP_FAILURES_H_
