#include "worker/params/parallel_calls.h"

#include <algorithm>

namespace tessera {

ParallelCalls::ParallelCalls(int width) {
  const int kept = std::max(0, width - 1);
  {
    absl::MutexLock lock(&mu_);
    index_.assign(kept, -1);
    result_.assign(kept, absl::OkStatus());
  }
  for (int slot = 0; slot < kept; ++slot) {
    threads_.emplace_back([this, slot] { Serve(slot); });
  }
}

ParallelCalls::~ParallelCalls() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ParallelCalls::Serve(int slot) {
  struct Wake {
    ParallelCalls* self;
    int slot;
  };
  Wake wake{this, slot};
  while (true) {
    const std::function<absl::Status(int)>* call;
    int index;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return w->self->stop_ || w->self->index_[w->slot] >= 0;
          },
          &wake));
      if (stop_) return;
      call = call_;
      index = index_[slot];
    }
    absl::Status status = (*call)(index);
    absl::MutexLock lock(&mu_);
    index_[slot] = -1;
    result_[slot] = std::move(status);
    --pending_;
  }
}

absl::Status ParallelCalls::Run(absl::Span<const int> indices,
                                const std::function<absl::Status(int)>& call) {
  if (indices.empty()) return absl::OkStatus();
  const size_t others = std::min(indices.size() - 1, threads_.size());
  {
    absl::MutexLock lock(&mu_);
    call_ = &call;
    for (size_t slot = 0; slot < others; ++slot) index_[slot] = indices[slot];
    pending_ = static_cast<int>(others);
  }
  // The calling thread makes the last call, and any beyond the width.
  std::vector<absl::Status> own;
  for (size_t i = others; i < indices.size(); ++i) {
    own.push_back(call(indices[i]));
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* pending) { return *pending == 0; }, &pending_));
  call_ = nullptr;
  for (size_t slot = 0; slot < others; ++slot) {
    if (!result_[slot].ok()) return result_[slot];
  }
  for (const absl::Status& s : own) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tessera
