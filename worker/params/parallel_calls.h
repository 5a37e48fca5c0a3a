// Runs one call per parameter server at once, on threads kept for the
// object's life: a step's pulls and pushes reuse them instead of starting
// a thread per server per call.
//
// Thread safety: Run is called by one thread at a time.

#ifndef TESSERA_WORKER_PARAMS_PARALLEL_CALLS_H_
#define TESSERA_WORKER_PARAMS_PARALLEL_CALLS_H_

#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace tessera {

class ParallelCalls {
 public:
  // `width`: the most calls one Run makes at once (the calling thread
  // makes one of them, so width - 1 threads are kept).
  explicit ParallelCalls(int width);
  ~ParallelCalls();
  ParallelCalls(const ParallelCalls&) = delete;
  ParallelCalls& operator=(const ParallelCalls&) = delete;

  // Runs call(k) for every k of `indices` (at most width of them),
  // concurrently, and returns the first error in the order of `indices`.
  absl::Status Run(absl::Span<const int> indices,
                   const std::function<absl::Status(int)>& call);

 private:
  void Serve(int slot);

  absl::Mutex mu_;
  // The current Run: the index each kept thread is to call (-1: none,
  // or done), its result, and how many calls are still running.
  const std::function<absl::Status(int)>* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<int> index_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> result_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_PARAMS_PARALLEL_CALLS_H_
