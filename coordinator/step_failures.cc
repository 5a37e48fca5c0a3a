#include "coordinator/step_failures.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace tessera {

absl::Status CancelledAfterError(int64_t step) {
  return absl::CancelledError(
      absl::StrCat("step ", step, " cancelled after an earlier error"));
}

absl::Status ReplicaLostError(int64_t step, int worker,
                              const absl::Status& status) {
  return absl::AbortedError(absl::StrCat(
      "step ", step, " failed on worker ", worker, " (", status.message(),
      "): its replica missed a step the others made, so ",
      "the round runs again from the survivors' replica or the job goes "
      "back to its last checkpoint; without checkpoints (--checkpoint_dir) "
      "the job stops"));
}

std::optional<absl::Duration> RetryPause(int worker, const absl::Status& status,
                                         absl::Duration retry_timeout,
                                         QueuedStep* p) {
  if (!absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) {
    return std::nullopt;
  }
  const absl::Time now = absl::Now();
  if (p->first_failure == absl::InfiniteFuture()) p->first_failure = now;
  if (now - p->first_failure >= retry_timeout) return std::nullopt;
  const absl::Duration pause = p->backoff.Next();
  LOG(WARNING) << "step " << p->request.step() << " failed on worker " << worker
               << ", which still answers (" << status
               << "); running it again in " << absl::FormatDuration(pause)
               << " (retrying for up to " << absl::FormatDuration(retry_timeout)
               << ")";
  return pause;
}

}  // namespace tessera
