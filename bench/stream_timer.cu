// StreamTimer with CUDA events on the backend's stream (host clock where
// the backend has none).
#include <cuda_runtime.h>

#include <chrono>
#include <vector>

#include "bench/stream_timer.h"

namespace tessera {

struct StreamTimer::Impl {
  Backend* backend = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;  // kept for reuse
  int used = 0;
  std::vector<std::chrono::steady_clock::time_point> clock;
};

StreamTimer::StreamTimer(Backend* backend) : impl_(std::make_unique<Impl>()) {
  impl_->backend = backend;
  impl_->stream = static_cast<cudaStream_t>(backend->native_stream());
}

StreamTimer::~StreamTimer() {
  for (cudaEvent_t e : impl_->events) cudaEventDestroy(e);
}

void StreamTimer::Mark() {
  Impl& impl = *impl_;
  if (impl.stream == nullptr) {
    impl.backend->Synchronize().IgnoreError();
    impl.clock.push_back(std::chrono::steady_clock::now());
    return;
  }
  if (impl.used == static_cast<int>(impl.events.size())) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return;
    impl.events.push_back(e);
  }
  cudaEventRecord(impl.events[impl.used++], impl.stream);
}

std::vector<double> StreamTimer::TakeIntervals() {
  Impl& impl = *impl_;
  std::vector<double> out;
  if (impl.stream == nullptr) {
    for (size_t i = 1; i < impl.clock.size(); ++i) {
      out.push_back(
          std::chrono::duration<double>(impl.clock[i] - impl.clock[i - 1])
              .count());
    }
    impl.clock.clear();
    return out;
  }
  const int used = impl.used;
  impl.used = 0;
  if (used == 0 || cudaEventSynchronize(impl.events[used - 1]) != cudaSuccess) {
    return {};
  }
  for (int i = 1; i < used; ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, impl.events[i - 1], impl.events[i]) !=
        cudaSuccess) {
      return {};
    }
    out.push_back(ms * 1e-3);
  }
  return out;
}

}  // namespace tessera
