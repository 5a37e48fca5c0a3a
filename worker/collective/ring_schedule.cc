#include "worker/collective/ring_schedule.h"

#include <algorithm>

namespace tessera {

RingSchedule::RingSchedule(int num_ranks, int rank, int64_t num_elements)
    : num_ranks_(num_ranks), rank_(rank), num_elements_(num_elements) {}

int64_t RingSchedule::SegmentBegin(int segment) const {
  const int64_t base = num_elements_ / num_ranks_;
  const int64_t extra = num_elements_ % num_ranks_;
  return segment * base + std::min<int64_t>(segment, extra);
}

int64_t RingSchedule::SegmentSize(int segment) const {
  const int64_t base = num_elements_ / num_ranks_;
  return base + (segment < num_elements_ % num_ranks_ ? 1 : 0);
}

}  // namespace tessera
