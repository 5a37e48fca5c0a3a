// The event pool's order of service (issue #46): connections whose next
// request has arrived wait here for a pool thread, in two FIFO queues, one
// for small requests (cheap to serve: a batch's rows) and one for large
// ones (a whole dense shard each way). Served in arrival order, a cheap
// request waits behind every large one that became ready before it, and
// on a pool of one thread per core its latency is theirs; a thread per
// connection does not have this wait, since the scheduler gives a woken
// thread with little to do a core at once.
//
// The rule: Take returns the oldest small item, unless `small_per_large`
// small items have been taken in a row while a large one waited; then it
// returns the oldest large one. A small request a thread finds ready
// outside the queues (MayServeSmall) is served at once and counts as
// taken, unless a large one is due: then it is queued. So a large request
// waits for at most `small_per_large` small ones served ahead of it per
// large one ahead of it in its queue, however many small ones keep
// arriving; with both kinds always waiting, `small_per_large` small
// requests are served per large one.
//
// Thread safety: every method may be called from any thread.
#ifndef TESSERA_COMMON_DATA_PLANE_READY_QUEUES_H_
#define TESSERA_COMMON_DATA_PLANE_READY_QUEUES_H_

#include <atomic>
#include <deque>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

template <typename T>
class ReadyQueues {
 public:
  // `small_per_large` >= 1: EventListener::Start refuses less, naming the
  // option; a value below that gets here anyway is taken as 1 rather than
  // let large items jump every small one.
  explicit ReadyQueues(int small_per_large)
      : small_per_large_(small_per_large < 1 ? 1 : small_per_large) {}

  void Push(T item, bool small) {
    absl::MutexLock lock(&mu_);
    (small ? small_ : large_).push_back(std::move(item));
    if (!small) large_waiting_.fetch_add(1, std::memory_order_release);
  }

  // A small request found outside the queues: true when it may be served
  // now (counted as a small one taken); false when a large one is due, and
  // the small one must be pushed.
  bool MayServeSmall() {
    if (large_waiting_.load(std::memory_order_acquire) == 0) return true;
    absl::MutexLock lock(&mu_);
    if (large_.empty()) {
      small_in_a_row_ = 0;
      return true;
    }
    if (small_in_a_row_ >= small_per_large_) return false;
    ++small_in_a_row_;
    return true;
  }

  // The next item by the rule above; nullopt when both queues are empty.
  std::optional<T> Take() {
    absl::MutexLock lock(&mu_);
    const bool large_due =
        !large_.empty() &&
        (small_.empty() || small_in_a_row_ >= small_per_large_);
    std::deque<T>& from = large_due || small_.empty() ? large_ : small_;
    if (from.empty()) return std::nullopt;
    if (&from == &small_) {
      // Counts only while a large item waits: a run of small ones with
      // none waiting delays nobody.
      small_in_a_row_ = large_.empty() ? 0 : small_in_a_row_ + 1;
    } else {
      small_in_a_row_ = 0;
      large_waiting_.fetch_sub(1, std::memory_order_release);
    }
    T item = std::move(from.front());
    from.pop_front();
    return item;
  }

 private:
  const int small_per_large_;
  absl::Mutex mu_;
  std::deque<T> small_ ABSL_GUARDED_BY(mu_);
  std::deque<T> large_ ABSL_GUARDED_BY(mu_);
  int small_in_a_row_ ABSL_GUARDED_BY(mu_) = 0;
  // large_.size(), read without the lock by MayServeSmall's common case.
  std::atomic<int> large_waiting_{0};
};

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_READY_QUEUES_H_
