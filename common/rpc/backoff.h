// How Tessera waits for a peer that does not answer yet. Every loop that
// retries (waiting for the cluster, a parameter server or worker coming
// back, an evaluation on another worker) and gRPC's own retries
// (grpc_channel.cc) use these figures, so a restarted task is found at the
// same pace wherever it is waited for.

#ifndef TESSERA_COMMON_BACKOFF_H_
#define TESSERA_COMMON_BACKOFF_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tessera {

// The first pause, the longest, and the growth between them.
inline constexpr absl::Duration kBackoffInitial = absl::Milliseconds(100);
inline constexpr absl::Duration kBackoffMax = absl::Seconds(2);
inline constexpr int kBackoffMultiplier = 2;

// How long one health check (a Health RPC to a parameter server, worker
// or coordinator) may take before its task counts as not answering.
inline constexpr absl::Duration kHealthCheckTimeout = absl::Seconds(2);
inline constexpr double kHealthCheckTimeoutS = 2.0;

// The pauses of one retry loop: kBackoffInitial, growing by
// kBackoffMultiplier up to kBackoffMax.
class Backoff {
 public:
  // The pause before the next attempt.
  absl::Duration Next();

 private:
  absl::Duration next_ = kBackoffInitial;
};

// Calls `attempt` until it returns OK or `deadline` has passed, pausing
// with Backoff between attempts (never past the deadline). Returns the
// last attempt's status.
absl::Status RetryUntil(absl::Time deadline,
                        const std::function<absl::Status()>& attempt);

// Whether a call failed because its peer died, restarted or did not answer
// in time (UNAVAILABLE, DEADLINE_EXCEEDED): a restarted task answers again,
// so the call is worth repeating. Any other failure is the peer's answer.
bool IsTransient(const absl::Status& status);

// As RetryUntil, but ends at the first failure that is not transient.
absl::Status RetryTransientUntil(absl::Time deadline,
                                 const std::function<absl::Status()>& attempt);

}  // namespace tessera

#endif  // TESSERA_COMMON_BACKOFF_H_
