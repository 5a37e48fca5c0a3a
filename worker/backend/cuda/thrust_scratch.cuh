#ifndef TESSERA_WORKER_BACKEND_CUDA_THRUST_SCRATCH_CUH_
#define TESSERA_WORKER_BACKEND_CUDA_THRUST_SCRATCH_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <new>

namespace tessera {

// Thrust's temporary storage, kept between calls: a freed block goes back
// to a free list by size and is handed out again, so a reduce, sort or scan
// does not cudaMalloc and cudaFree (a device-wide synchronisation) on every
// call, as Thrust's default allocator does. Used by one stream at a time.
class ThrustScratch {
 public:
  using value_type = char;

  ThrustScratch() = default;
  ThrustScratch(const ThrustScratch&) = delete;
  ThrustScratch& operator=(const ThrustScratch&) = delete;
  ~ThrustScratch() {
    for (auto& [bytes, ptr] : free_) cudaFree(ptr);
    for (auto& [ptr, bytes] : used_) cudaFree(ptr);
  }

  char* allocate(std::ptrdiff_t bytes) {
    auto it = free_.lower_bound(bytes);
    if (it != free_.end()) {
      char* ptr = it->second;
      used_.emplace(ptr, it->first);
      free_.erase(it);
      return ptr;
    }
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, std::max<std::ptrdiff_t>(bytes, 1)) != cudaSuccess) {
      cudaGetLastError();  // reported as the exception, not to a later call
      throw std::bad_alloc();
    }
    used_.emplace(static_cast<char*>(ptr), bytes);
    return static_cast<char*>(ptr);
  }

  void deallocate(char* ptr, size_t) {
    auto it = used_.find(ptr);
    if (it == used_.end()) return;
    free_.emplace(it->second, ptr);
    used_.erase(it);
  }

 private:
  std::multimap<std::ptrdiff_t, char*> free_;
  std::map<char*, std::ptrdiff_t> used_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_CUDA_THRUST_SCRATCH_CUH_
