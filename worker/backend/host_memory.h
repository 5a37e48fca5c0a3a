// Host memory that a backend's device copies to and from: the allocator a
// backend provides (pinned, page-locked memory on the CUDA backend, so
// copies skip the staging buffers and run asynchronously; plain memory on
// the CPU), and an owning array of it for the buffers that pulled
// parameters land in and gradients leave from.
//
// Thread safety: an allocator may be called from one thread at a time (as
// its backend); the memory it hands out may be used from any thread.

#ifndef TESSERA_WORKER_BACKEND_HOST_MEMORY_H_
#define TESSERA_WORKER_BACKEND_HOST_MEMORY_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/types/span.h"

namespace tessera {

// Plain host memory, 64-byte aligned (Eigen's vector loads), at least one
// byte; nullptr when the system has none left. Freed by FreePlainHost.
inline void* AllocatePlainHost(int64_t bytes) {
  const size_t rounded = ((std::max<int64_t>(bytes, 1) + 63) / 64) * 64;
  return std::aligned_alloc(64, rounded);
}
inline void FreePlainHost(void* ptr) { std::free(ptr); }

class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // At least `bytes` (and one) of host memory, 64-byte aligned; never
  // null unless the host itself is out of memory (an implementation that
  // cannot pin falls back to plain memory).
  virtual void* AllocateHost(int64_t bytes) = 0;
  // Frees what AllocateHost returned; null does nothing.
  virtual void FreeHost(void* ptr) = 0;
};

// Owns `count` zeroed elements of T from a HostAllocator (null, or an
// allocator that returns null: plain memory), which must outlive the
// array.
template <typename T>
class HostArray {
 public:
  HostArray() = default;
  HostArray(HostAllocator* allocator, int64_t count)
      : allocator_(allocator), count_(count) {
    const int64_t bytes = count * static_cast<int64_t>(sizeof(T));
    if (allocator != nullptr) {
      data_ = static_cast<T*>(allocator->AllocateHost(bytes));
    }
    if (data_ == nullptr) {
      allocator_ = nullptr;
      data_ = static_cast<T*>(AllocatePlainHost(bytes));
    }
    // As std::vector's bad_alloc would: a host out of memory ends the
    // process.
    if (data_ == nullptr) std::abort();
    std::memset(static_cast<void*>(data_), 0, bytes);
  }
  ~HostArray() { Reset(); }
  HostArray(HostArray&& other) noexcept { *this = std::move(other); }
  HostArray& operator=(HostArray&& other) noexcept {
    if (this == &other) return *this;
    Reset();
    std::swap(allocator_, other.allocator_);
    std::swap(count_, other.count_);
    std::swap(data_, other.data_);
    return *this;
  }
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;

  T* data() const { return data_; }
  int64_t size() const { return count_; }
  T* begin() const { return data_; }
  T* end() const { return data_ + count_; }
  T& operator[](int64_t i) const { return data_[i]; }

 private:
  void Reset() {
    if (data_ != nullptr) {
      if (allocator_ != nullptr) {
        allocator_->FreeHost(data_);
      } else {
        FreePlainHost(data_);
      }
    }
    data_ = nullptr;
    count_ = 0;
  }

  HostAllocator* allocator_ = nullptr;
  int64_t count_ = 0;
  T* data_ = nullptr;
};

// A HostArray reused across steps whose used size changes per step (the
// embedding rows a batch pulls): Resize keeps the memory while it fits and
// otherwise allocates at least twice the old capacity, so pinned memory,
// which is slow to allocate, is allocated a few times per run rather than
// per step. Resize does not keep the contents.
template <typename T>
class HostBuffer {
 public:
  explicit HostBuffer(HostAllocator* allocator = nullptr)
      : allocator_(allocator) {}

  // Makes span() `count` elements long.
  void Resize(int64_t count) {
    if (count > array_.size()) {
      array_ = HostArray<T>(allocator_, std::max(count, 2 * array_.size()));
    }
    size_ = count;
  }
  T* data() const { return array_.data(); }
  int64_t size() const { return size_; }
  int64_t capacity() const { return array_.size(); }
  absl::Span<T> span() const { return absl::MakeSpan(array_.data(), size_); }

 private:
  HostAllocator* allocator_;
  HostArray<T> array_;
  int64_t size_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_BACKEND_HOST_MEMORY_H_
