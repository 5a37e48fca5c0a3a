#include "ps_server/sync_aggregator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera {

SyncAggregator::SyncAggregator(int64_t num_elements)
    : num_elements_(num_elements) {}

absl::StatusOr<SyncAggregator::Outcome> SyncAggregator::Add(
    int64_t step, int required, absl::Span<const float> grad,
    std::vector<float>* average) {
  if (static_cast<int64_t>(grad.size()) != num_elements_) {
    return absl::InvalidArgumentError(
        absl::StrCat("sync step ", step, ": gradient has ", grad.size(),
                     " elements, the shard ", num_elements_));
  }
  if (required < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sync step ", step,
                     ": required gradients must be >= 1, got ", required));
  }
  absl::MutexLock lock(&mu_);
  if (step <= released_step_ || step < pending_step_) {
    ++dropped_;
    return Outcome::kLate;
  }
  if (step > pending_step_) {
    // A newer step overtook an unfinished one (its missing workers died
    // or were too slow): the partial sum can never complete.
    if (pending_count_ > 0) dropped_ += pending_count_;
    pending_step_ = step;
    pending_required_ = required;
    pending_count_ = 0;
    sum_.assign(num_elements_, 0.0);
  } else if (required != pending_required_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sync step ", step, ": a push needs ", required,
        " gradients, earlier pushes of the step needed ", pending_required_));
  }
  // Summed in double so the average does not depend on arrival order
  // beyond the last bit of float rounding.
  for (int64_t i = 0; i < num_elements_; ++i) sum_[i] += grad[i];
  if (++pending_count_ < pending_required_) return Outcome::kAccumulated;
  average->resize(num_elements_);
  const double scale = 1.0 / pending_required_;
  for (int64_t i = 0; i < num_elements_; ++i) {
    (*average)[i] = static_cast<float>(sum_[i] * scale);
  }
  released_step_ = step;
  pending_count_ = 0;
  return Outcome::kReleased;
}

int64_t SyncAggregator::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

int64_t SyncAggregator::released_step() const {
  absl::MutexLock lock(&mu_);
  return released_step_;
}

void SyncAggregator::Reset() {
  absl::MutexLock lock(&mu_);
  pending_step_ = -1;
  pending_required_ = 0;
  pending_count_ = 0;
  std::fill(sum_.begin(), sum_.end(), 0.0);
  released_step_ = -1;
}

SyncAggregator* SyncAggregators::For(const std::string& shard,
                                     int64_t num_elements) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<SyncAggregator>& agg = map_[shard];
  if (agg == nullptr) agg = std::make_unique<SyncAggregator>(num_elements);
  return agg.get();
}

void SyncAggregators::ResetAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [name, agg] : map_) agg->Reset();
}

int64_t SyncAggregators::dropped() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [name, agg] : map_) total += agg->dropped();
  return total;
}

}  // namespace tessera
