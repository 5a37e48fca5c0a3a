#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/cuda_backend_impl.cuh"

namespace tessera {

void* CudaBackend::AllocateBytes(int64_t bytes) {
  if (!Ready()) return nullptr;
  void* ptr = nullptr;
  Check(cudaMalloc(&ptr, std::max<int64_t>(bytes, 1)),
        absl::StrCat("cudaMalloc of ", bytes, " bytes").c_str());
  return ptr;
}

// A failed free is recorded like any failed call (Check clears it from
// the runtime's last error, so the next launch is not blamed for it).
void CudaBackend::FreeBytes(void* ptr) {
  if (ptr == nullptr) return;
  Check(cudaSetDevice(ordinal_), "cudaSetDevice (free)");
  Check(cudaFree(ptr), "cudaFree");
}

// Pinned (page-locked) memory, which the DMA engines read and write
// directly: copies from and to it skip the staging buffers, and one from
// it returns as soon as it is queued. Where pinning fails (too much of
// the host pinned already), plain memory: slower copies, same results.
void* CudaBackend::AllocateHost(int64_t bytes) {
  void* ptr = nullptr;
  const int64_t size = std::max<int64_t>(bytes, 1);
  if (cudaHostAlloc(&ptr, size, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();  // not a device error: no later launch is blamed
    return AllocatePlainHost(bytes);
  }
  std::lock_guard<std::mutex> lock(pinned_mu_);
  pinned_.emplace(static_cast<const char*>(ptr), size);
  return ptr;
}

void CudaBackend::FreeHost(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(pinned_mu_);
    auto it = pinned_.find(static_cast<const char*>(ptr));
    if (it != pinned_.end()) {
      pinned_.erase(it);
      if (cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError();
      return;
    }
  }
  FreePlainHost(ptr);
}

// A pinned buffer goes straight to the device on the stream; any other
// through the pinned staging buffers, alternating, so the host memcpy of
// one chunk overlaps the DMA of the previous one, and returns once the
// host buffer may be reused.
void CudaBackend::CopyToDevice(const void* host, void* device, int64_t bytes) {
  if (bytes <= 0 || !Ready()) return;
  if (Pinned(host, bytes)) {
    Check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync from pinned memory");
    return;
  }
  const char* src = static_cast<const char*>(host);
  char* dst = static_cast<char*>(device);
  for (int64_t done = 0; done < bytes && status_.ok();) {
    const int64_t chunk = std::min(kStagingBytes, bytes - done);
    Staging& s = upload_[next_upload_];
    next_upload_ ^= 1;
    if (!Check(cudaEventSynchronize(s.done), "waiting for an upload")) return;
    std::memcpy(s.host, src + done, chunk);
    Check(cudaMemcpyAsync(dst + done, s.host, chunk, cudaMemcpyHostToDevice,
                          stream_),
          "cudaMemcpyAsync to device");
    Check(cudaEventRecord(s.done, stream_), "cudaEventRecord");
    done += chunk;
  }
}

// On the prefetching thread: the copy goes on upload_stream_, which only
// this method queues copies on, so it runs beside the ops' kernels. The
// CUDA runtime's current device is per thread, hence the cudaSetDevice.
// Errors stay in upload_status_ (its own lock: status_ belongs to the
// ops' thread) until AwaitUploads reports them.
void CudaBackend::Upload(const void* host, void* device, int64_t bytes) {
  if (bytes <= 0 || device_failed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(upload_mu_);
  if (!upload_status_.ok()) return;
  const char* what = "cudaSetDevice (upload)";
  cudaError_t err = cudaSuccess;
  if (host == nullptr || device == nullptr) {
    // Refused before the runtime sees it: a copy to or from a bad address
    // that the driver queued would fault in flight and poison the context.
    what = "upload (a null pointer)";
    err = cudaErrorInvalidValue;
  } else {
    err = cudaSetDevice(ordinal_);
  }
  if (err == cudaSuccess) {
    what = Pinned(host, bytes) ? "cudaMemcpyAsync (upload from pinned memory)"
                               : "cudaMemcpyAsync (upload)";
    err = cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice,
                          upload_stream_);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();  // reported below, not blamed on a later call
    upload_status_ = absl::InternalError(absl::StrCat(
        name_, ": ", what, " of ", bytes, " bytes failed: ",
        cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
  }
}

void CudaBackend::AwaitUploads() {
  {
    std::lock_guard<std::mutex> lock(upload_mu_);
    if (!upload_status_.ok() && status_.ok()) status_ = upload_status_;
  }
  OrderStreams(upload_stream_, stream_, uploaded_, "uploads done");
}

void CudaBackend::ReleaseUploads() {
  OrderStreams(stream_, upload_stream_, released_, "upload targets read");
}

void CudaBackend::CopyToHost(const void* device, void* host, int64_t bytes) {
  if (bytes <= 0 || !Ready()) return;
  if (Pinned(host, bytes)) {
    if (Check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost,
                              stream_),
              "cudaMemcpyAsync to pinned memory")) {
      Check(cudaStreamSynchronize(stream_), "waiting for a download");
    }
    return;
  }
  const char* src = static_cast<const char*>(device);
  char* dst = static_cast<char*>(host);
  Staging* pending = nullptr;
  int64_t pending_offset = 0, pending_bytes = 0;
  auto drain = [&]() {
    if (pending == nullptr) return;
    if (Check(cudaEventSynchronize(pending->done), "waiting for a download")) {
      std::memcpy(dst + pending_offset, pending->host, pending_bytes);
    }
    pending = nullptr;
  };
  for (int64_t done = 0, i = 0; done < bytes && status_.ok(); ++i) {
    const int64_t chunk = std::min(kStagingBytes, bytes - done);
    Staging& s = download_[i & 1];
    Check(cudaMemcpyAsync(s.host, src + done, chunk, cudaMemcpyDeviceToHost,
                          stream_),
          "cudaMemcpyAsync to host");
    Check(cudaEventRecord(s.done, stream_), "cudaEventRecord");
    drain();
    pending = &s;
    pending_offset = done;
    pending_bytes = chunk;
    done += chunk;
  }
  drain();
}

void CudaBackend::CopyOnDevice(const void* from, void* to, int64_t bytes) {
  if (bytes <= 0 || !Ready()) return;
  Check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync on device");
}

absl::Status CudaBackend::Synchronize() {
  if (Ready()) Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return status_;
}

bool CudaBackend::Pinned(const void* ptr, int64_t bytes) {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(pinned_mu_);
  auto it = pinned_.upper_bound(p);
  if (it == pinned_.begin()) return false;
  --it;
  return p + bytes <= it->first + it->second;
}

void CudaBackend::OrderStreams(cudaStream_t earlier, cudaStream_t later,
                               cudaEvent_t event, const char* what) {
  if (Ready()) {
    Check(cudaEventRecord(event, earlier),
          absl::StrCat("cudaEventRecord (", what, ")").c_str());
    Check(cudaStreamWaitEvent(later, event, 0),
          absl::StrCat("cudaStreamWaitEvent (", what, ")").c_str());
  }
  device_failed_.store(!status_.ok(), std::memory_order_release);
}

}  // namespace tessera
