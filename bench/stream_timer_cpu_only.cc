// The CPU-only twin of stream_timer.cu, for builds without nvcc: every
// backend's ops have finished (after Synchronize) when the clock is read.
#include <chrono>
#include <vector>

#include "bench/stream_timer.h"

namespace tessera {

struct StreamTimer::Impl {
  Backend* backend = nullptr;
  std::vector<std::chrono::steady_clock::time_point> clock;
};

StreamTimer::StreamTimer(Backend* backend) : impl_(std::make_unique<Impl>()) {
  impl_->backend = backend;
}

StreamTimer::~StreamTimer() = default;

void StreamTimer::Mark() {
  impl_->backend->Synchronize().IgnoreError();
  impl_->clock.push_back(std::chrono::steady_clock::now());
}

std::vector<double> StreamTimer::TakeIntervals() {
  std::vector<double> out;
  const auto& clock = impl_->clock;
  for (size_t i = 1; i < clock.size(); ++i) {
    out.push_back(
        std::chrono::duration<double>(clock[i] - clock[i - 1]).count());
  }
  impl_->clock.clear();
  return out;
}

}  // namespace tessera
