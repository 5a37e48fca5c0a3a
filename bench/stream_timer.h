// Points in a backend's queue of ops, for splitting a step's time into
// parts: on the CUDA backend CUDA events recorded on its stream
// (Backend::native_stream()), so marking never waits and the times are
// the device's; elsewhere (the CPU, whose ops have finished when they
// return) the host clock.
//
// Thread safety: as the backend, one thread at a time.

#ifndef TESSERA_BENCH_STREAM_TIMER_H_
#define TESSERA_BENCH_STREAM_TIMER_H_

#include <memory>
#include <vector>

#include "worker/backend/backend.h"

namespace tessera {

class StreamTimer {
 public:
  // `backend` must outlive the timer.
  explicit StreamTimer(Backend* backend);
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  // Records a point after every op queued so far.
  void Mark();

  // Waits for the last mark and returns the seconds between consecutive
  // marks (one fewer than there were), forgetting them; empty after a
  // device error.
  std::vector<double> TakeIntervals();

 private:
  struct Impl;  // CUDA events or clock readings
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera

#endif  // TESSERA_BENCH_STREAM_TIMER_H_
