#include "tests/tools/delay_schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera {

DelaySchedule::DelaySchedule(int64_t delay_us, int64_t jitter_us, uint64_t seed)
    : delay_us_(delay_us), rng_(seed), jitter_(-jitter_us, jitter_us) {}

absl::StatusOr<DelaySchedule> DelaySchedule::Create(int64_t delay_us,
                                                    int64_t jitter_us,
                                                    uint64_t seed) {
  if (jitter_us < 0 || delay_us < jitter_us) {
    return absl::InvalidArgumentError(
        absl::StrCat("need 0 <= jitter <= delay, got delay ", delay_us,
                     " us and jitter ", jitter_us, " us"));
  }
  return DelaySchedule(delay_us, jitter_us, seed);
}

void DelaySchedule::Add(uint32_t id, int64_t now_us) {
  heap_.push(
      Held{now_us + delay_us_ + jitter_(rng_), now_us, next_order_++, id});
}

std::optional<int64_t> DelaySchedule::NextRelease() const {
  if (heap_.empty()) return std::nullopt;
  return heap_.top().release_us;
}

std::optional<int64_t> DelaySchedule::PopOne(int64_t now_us, int64_t early_us,
                                             uint32_t* id) {
  if (heap_.empty() || heap_.top().release_us > now_us + early_us) {
    return std::nullopt;
  }
  const Held h = heap_.top();
  heap_.pop();
  const int64_t got = now_us - h.arrival_us;
  if (stats_.packets == 0) {
    stats_.min_us = stats_.max_us = got;
  } else {
    stats_.min_us = std::min(stats_.min_us, got);
    stats_.max_us = std::max(stats_.max_us, got);
  }
  ++stats_.packets;
  stats_.sum_us += static_cast<double>(got);
  *id = h.id;
  return now_us - h.release_us;
}

void DelaySchedule::PopDue(int64_t now_us, std::vector<uint32_t>* ids,
                           int64_t early_us) {
  uint32_t id = 0;
  while (PopOne(now_us, early_us, &id).has_value()) ids->push_back(id);
}

void DelaySchedule::ReleaseAll(std::vector<uint32_t>* ids) {
  while (!heap_.empty()) {
    ids->push_back(heap_.top().id);
    ++stats_.released_early;
    heap_.pop();
  }
}

}  // namespace tessera
