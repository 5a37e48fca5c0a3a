#include "common/rpc/backoff.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace tessera {

absl::Duration Backoff::Next() {
  const absl::Duration pause = next_;
  next_ = std::min(next_ * kBackoffMultiplier, kBackoffMax);
  return pause;
}

absl::Status RetryUntil(absl::Time deadline,
                        const std::function<absl::Status()>& attempt) {
  Backoff backoff;
  while (true) {
    absl::Status s = attempt();
    const absl::Time now = absl::Now();
    if (s.ok() || now >= deadline) return s;
    absl::SleepFor(std::min(backoff.Next(), deadline - now));
  }
}

bool IsTransient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

absl::Status RetryTransientUntil(absl::Time deadline,
                                 const std::function<absl::Status()>& attempt) {
  Backoff backoff;
  while (true) {
    absl::Status s = attempt();
    const absl::Time now = absl::Now();
    if (!IsTransient(s) || now >= deadline) return s;
    absl::SleepFor(std::min(backoff.Next(), deadline - now));
  }
}

}  // namespace tessera
