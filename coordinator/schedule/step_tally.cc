#include "coordinator/schedule/step_tally.h"

#include <algorithm>

namespace tessera {

StepTally::StepTally(int workers) : finish_times_(workers) {}

void StepTally::AddWorker() {
  absl::MutexLock lock(&mu_);
  finish_times_.emplace_back();
}

void StepTally::Finished(int worker, absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::deque<absl::Time>& times = finish_times_[worker];
  times.push_back(now);
  if (times.size() > kRateSamples) times.pop_front();
  ++done_;
}

void StepTally::CountRerun(int64_t steps) {
  absl::MutexLock lock(&mu_);
  rerun_ += steps;
}

int64_t StepTally::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

int64_t StepTally::rerun() const {
  absl::MutexLock lock(&mu_);
  return rerun_;
}

std::vector<double> StepTally::per_second(absl::Duration window,
                                          absl::Time now) const {
  absl::MutexLock lock(&mu_);
  std::vector<double> rates;
  for (const std::deque<absl::Time>& times : finish_times_) {
    // Steps finished within the window; when more than the samples kept
    // finished in it, the rate over the samples' own span.
    const auto first =
        std::lower_bound(times.begin(), times.end(), now - window);
    const int64_t n = times.end() - first;
    absl::Duration span = window;
    if (times.size() == kRateSamples && first == times.begin()) {
      span = now - times.front();
    }
    rates.push_back(n / std::max(1e-9, absl::ToDoubleSeconds(span)));
  }
  return rates;
}

}  // namespace tessera
