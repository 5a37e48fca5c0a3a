#include "coordinator/parallel/bounded_for_each.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

absl::Status BoundedForEach(int n, int max_concurrency,
                            const std::function<absl::Status(int)>& call) {
  if (n <= 0) return absl::OkStatus();
  const int threads = std::min(n, std::max(1, max_concurrency));
  if (threads == 1) {
    for (int i = 0; i < n; ++i) {
      if (absl::Status s = call(i); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  absl::Mutex mu;
  int next = 0;
  int failed_index = n;  // the lowest index whose call failed
  absl::Status failure;
  auto run = [&] {
    while (true) {
      int i;
      {
        absl::MutexLock lock(&mu);
        if (next >= n || failed_index < n) return;
        i = next++;
      }
      absl::Status s = call(i);
      if (s.ok()) continue;
      absl::MutexLock lock(&mu);
      if (i < failed_index) {
        failed_index = i;
        failure = std::move(s);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) pool.emplace_back(run);
  run();  // the caller's thread is one of them
  for (std::thread& t : pool) t.join();
  return failure;
}

}  // namespace tessera
