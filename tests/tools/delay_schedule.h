// When each held packet may leave, for tessera_packet_delay (the stand-in
// for tc netem's "delay D J" where the kernel has no netem): every packet
// is held D plus a uniform draw from [-J, +J], and packets leave in order
// of their release times, not of their arrival, so jitter reorders them as
// netem's does. Also keeps the statistics of the delays really applied
// (release time as the caller saw it minus arrival).
//
// Times are microseconds on any monotonic clock the caller chooses.
//
// Thread safety: none; one thread owns a schedule.
#ifndef TESSERA_TESTS_TOOLS_DELAY_SCHEDULE_H_
#define TESSERA_TESTS_TOOLS_DELAY_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <queue>
#include <random>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

struct DelayStats {
  int64_t packets = 0;  // released on time (the statistics below are theirs)
  int64_t released_early = 0;  // let go by ReleaseAll before their time
  double sum_us = 0;
  int64_t min_us = 0;
  int64_t max_us = 0;

  double mean_us() const { return packets > 0 ? sum_us / packets : 0.0; }
};

class DelaySchedule {
 public:
  // InvalidArgument unless 0 <= jitter_us <= delay_us (a packet is never
  // released before it arrived).
  static absl::StatusOr<DelaySchedule> Create(int64_t delay_us,
                                              int64_t jitter_us, uint64_t seed);

  // Holds packet `id`, which arrived at `now_us`.
  void Add(uint32_t id, int64_t now_us);

  // The earliest release time of a held packet; nullopt when none is held.
  std::optional<int64_t> NextRelease() const;

  // Takes the next packet to go if its release time is <= now_us +
  // early_us: sets *id and returns how late it goes against its release
  // time (now_us - release time; negative when early), counting now_us -
  // arrival as the delay it got. nullopt when none is due. early_us > 0
  // lets a caller that lets packets go late on average (timer and
  // scheduler latency) aim early by that much, so that the mean delay is
  // the one asked for.
  std::optional<int64_t> PopOne(int64_t now_us, int64_t early_us, uint32_t* id);

  // PopOne until none is due, appending the ids in release order.
  void PopDue(int64_t now_us, std::vector<uint32_t>* ids, int64_t early_us = 0);

  // Appends every held packet to `ids`, due or not (at exit); counted as
  // released early, not in the delay statistics.
  void ReleaseAll(std::vector<uint32_t>* ids);

  size_t held() const { return heap_.size(); }
  const DelayStats& stats() const { return stats_; }

 private:
  struct Held {
    int64_t release_us;
    int64_t arrival_us;
    uint64_t order;  // arrival order: equal release times leave FIFO
    uint32_t id;
  };
  struct Later {
    bool operator()(const Held& a, const Held& b) const {
      return a.release_us != b.release_us ? a.release_us > b.release_us
                                          : a.order > b.order;
    }
  };

  DelaySchedule(int64_t delay_us, int64_t jitter_us, uint64_t seed);

  int64_t delay_us_;
  std::mt19937_64 rng_;
  std::uniform_int_distribution<int64_t> jitter_;
  uint64_t next_order_ = 0;
  std::priority_queue<Held, std::vector<Held>, Later> heap_;
  DelayStats stats_;
};

}  // namespace tessera

#endif  // TESSERA_TESTS_TOOLS_DELAY_SCHEDULE_H_
