#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "worker/collective/nccl_allreduce.h"
#include "worker/collective/nccl_library.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point DeadlineAfter(double seconds) {
  return Clock::now() +
         std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

absl::Status NcclError(const NcclApi& nccl, const char* what,
                       ncclResult_t result, ncclComm_t comm) {
  const char* last = comm != nullptr ? nccl.get_last_error(comm) : nullptr;
  return absl::InternalError(absl::StrCat(
      "NCCL ", what, ": ", nccl.get_error_string(result),
      last != nullptr && last[0] != '\0' ? absl::StrCat(" (", last, ")") : ""));
}

// Also clears the runtime's last error (worker/backend/cuda/
// cuda_error_rule.h): the worker's CUDA backend, on this thread, would
// otherwise blame its next launch for this call's failure.
absl::Status CudaError(const char* what, cudaError_t error) {
  cudaGetLastError();
  return absl::InternalError(
      absl::StrCat("CUDA ", what, ": ", cudaGetErrorString(error)));
}

// The communicator is non-blocking, so that no NCCL call can wait forever
// for a rank that never comes: this polls until the last operation was
// taken up, failed, the deadline passed, or `aborted` (when given) was
// set (Aborted then; the caller knows why).
absl::Status WaitForComm(const NcclApi& nccl, ncclComm_t comm,
                         Clock::time_point deadline, const char* what,
                         const std::atomic<bool>* aborted = nullptr) {
  while (true) {
    if (aborted != nullptr && aborted->load(std::memory_order_acquire)) {
      return absl::AbortedError(absl::StrCat("NCCL ", what, ": aborted"));
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = nccl.comm_get_async_error(comm, &state);
    if (r != ncclSuccess) return NcclError(nccl, what, r, comm);
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclError(nccl, what, state, comm);
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("NCCL ", what, ": a rank did not take part in time"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

struct NcclAllReduce::Impl {
  explicit Impl(const NcclApi& api) : nccl(api) {}

  const NcclApi& nccl;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  double timeout_s = 0;
  absl::Status broken;       // set once the communicator was aborted
  float* staging = nullptr;  // AllReduceHost's device buffer
  size_t staging_floats = 0;
  // AllReduceHost's pinned host buffer: a copy from pageable memory would
  // be staged by the driver and synchronous.
  float* pinned = nullptr;
  size_t pinned_floats = 0;
  // Recorded on a producer's stream, waited for by `stream`.
  cudaEvent_t produced = nullptr;
  // Set by Abort from any thread; `abort_why` says why.
  std::atomic<bool> aborted{false};
  std::mutex abort_mu;
  absl::Status abort_why;

  ~Impl() {
    if (comm != nullptr && aborted.load(std::memory_order_acquire)) {
      // A peer gave up or died: finalizing would wait for it.
      cudaSetDevice(device);
      nccl.comm_abort(comm);
      comm = nullptr;
    }
    if (comm != nullptr) {
      // Finalize flushes this rank's work and waits until every rank is
      // quiescent, within the deadline; a dead or hung peer makes it time
      // out, and the communicator is then aborted rather than destroyed
      // (which would wait for that peer forever), so a worker never hangs
      // at exit.
      cudaSetDevice(device);
      const auto deadline =
          Clock::now() +
          std::chrono::duration_cast<Clock::duration>(
              std::chrono::duration<double>(std::max(timeout_s, 1.0)));
      const ncclResult_t r = nccl.comm_finalize(comm);
      const absl::Status finalized =
          r == ncclSuccess || r == ncclInProgress
              ? WaitForComm(nccl, comm, deadline, "finalize")
              : NcclError(nccl, "finalize", r, comm);
      if (finalized.ok()) {
        nccl.comm_destroy(comm);
      } else {
        nccl.comm_abort(comm);
      }
    }
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (produced != nullptr) cudaEventDestroy(produced);
    if (staging != nullptr) cudaFree(staging);
    if (pinned != nullptr) cudaFreeHost(pinned);
  }

  // Breaks the communicator with Abort's reason once Abort was called (OK
  // otherwise): on the owning thread, before and while polling.
  absl::Status BreakIfAborted() {
    if (!aborted.load(std::memory_order_acquire)) return absl::OkStatus();
    if (!broken.ok()) return broken;
    std::lock_guard<std::mutex> lock(abort_mu);
    return Break(abort_why);
  }

  // Aborts the communicator after an error; every later call fails.
  absl::Status Break(absl::Status status) {
    if (comm != nullptr) nccl.comm_abort(comm);
    comm = nullptr;
    broken = status;
    return status;
  }
};

bool NcclBuilt() { return true; }

absl::Status NcclLoadable() { return LoadNccl().status(); }

absl::StatusOr<std::string> NcclAllReduce::NewUniqueId() {
  absl::StatusOr<const NcclApi*> nccl = LoadNccl();
  if (!nccl.ok()) return nccl.status();
  ncclUniqueId id;
  const ncclResult_t r = (*nccl)->get_unique_id(&id);
  if (r != ncclSuccess) return NcclError(**nccl, "GetUniqueId", r, nullptr);
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclAllReduce>> NcclAllReduce::Create(
    int rank, int num_ranks, const std::string& unique_id, int device,
    double timeout_s, double init_timeout_s) {
  ncclUniqueId id;
  if (num_ranks < 1 || rank < 0 || rank >= num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL all-reduce: rank ", rank, " of ", num_ranks, " does not exist"));
  }
  if (unique_id.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL all-reduce: the unique id has ", unique_id.size(),
                     " bytes, NCCL's has ", sizeof(id.internal)));
  }
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  absl::StatusOr<const NcclApi*> nccl = LoadNccl();
  if (!nccl.ok()) return nccl.status();
  auto impl = std::make_unique<Impl>(**nccl);
  impl->device = device;
  impl->timeout_s = timeout_s;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return CudaError(absl::StrCat("SetDevice(", device, ")").c_str(), e);
  }
  if (cudaError_t e =
          cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return CudaError("StreamCreate", e);
  }
  if (cudaError_t e =
          cudaEventCreateWithFlags(&impl->produced, cudaEventDisableTiming);
      e != cudaSuccess) {
    return CudaError("EventCreate", e);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = impl->nccl.comm_init_rank_config(&impl->comm, num_ranks, id,
                                                    rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    return impl->Break(NcclError(impl->nccl, "CommInitRank", r, impl->comm));
  }
  if (absl::Status s = WaitForComm(
          impl->nccl, impl->comm,
          DeadlineAfter(init_timeout_s < 0 ? timeout_s : init_timeout_s),
          "CommInitRank");
      !s.ok()) {
    return impl->Break(s);
  }
  return std::unique_ptr<NcclAllReduce>(
      new NcclAllReduce(rank, num_ranks, std::move(impl)));
}

NcclAllReduce::NcclAllReduce(int rank, int num_ranks,
                             std::unique_ptr<Impl> impl)
    : rank_(rank), num_ranks_(num_ranks), impl_(std::move(impl)) {}

NcclAllReduce::~NcclAllReduce() = default;

void NcclAllReduce::Abort(const absl::Status& why) {
  Impl& impl = *impl_;
  {
    std::lock_guard<std::mutex> lock(impl.abort_mu);
    if (impl.abort_why.ok()) {
      impl.abort_why =
          why.ok() ? absl::AbortedError("NCCL all-reduce aborted") : why;
    }
  }
  impl.aborted.store(true, std::memory_order_release);
}

absl::Status NcclAllReduce::AllReduce(absl::Span<float> data) {
  Impl& impl = *impl_;
  if (absl::Status s = impl.BreakIfAborted(); !s.ok()) return s;
  if (!impl.broken.ok()) return impl.broken;
  const Clock::time_point deadline = DeadlineAfter(impl.timeout_s);
  if (cudaError_t e = cudaSetDevice(impl.device); e != cudaSuccess) {
    return CudaError("SetDevice", e);
  }
  const ncclResult_t r =
      impl.nccl.all_reduce(data.data(), data.data(), data.size(), ncclFloat,
                           ncclSum, impl.comm, impl.stream);
  if (r != ncclSuccess && r != ncclInProgress) {
    return impl.Break(NcclError(impl.nccl, "AllReduce", r, impl.comm));
  }
  if (absl::Status s = WaitForComm(impl.nccl, impl.comm, deadline, "AllReduce",
                                   &impl.aborted);
      !s.ok()) {
    if (absl::Status a = impl.BreakIfAborted(); !a.ok()) return a;
    return impl.Break(s);
  }
  // Waits for the kernel without blocking in CUDA, so a rank that never
  // joins turns into a deadline instead of a hang.
  while (true) {
    const cudaError_t e = cudaStreamQuery(impl.stream);
    if (e == cudaSuccess) return absl::OkStatus();
    if (e != cudaErrorNotReady) {
      return impl.Break(CudaError("AllReduce kernel", e));
    }
    if (absl::Status s = WaitForComm(impl.nccl, impl.comm, deadline,
                                     "AllReduce", &impl.aborted);
        !s.ok()) {
      if (absl::Status a = impl.BreakIfAborted(); !a.ok()) return a;
      return impl.Break(s);
    }
    if (Clock::now() > deadline) {
      return impl.Break(absl::DeadlineExceededError(
          absl::StrCat("NCCL AllReduce: rank ", rank_, " of ", num_ranks_,
                       " got no result within ", impl.timeout_s, " s")));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

absl::Status NcclAllReduce::AllReduceOnDevice(absl::Span<float> data,
                                              void* producer_stream) {
  Impl& impl = *impl_;
  if (absl::Status s = impl.BreakIfAborted(); !s.ok()) return s;
  if (!impl.broken.ok()) return impl.broken;
  if (producer_stream != nullptr) {
    if (cudaError_t e = cudaSetDevice(impl.device); e != cudaSuccess) {
      return CudaError("SetDevice", e);
    }
    // The producer's work so far (the backward pass, the scaling of the
    // gradients) comes before the sum on the device; the host goes on to
    // queue the all-reduce at once.
    if (cudaError_t e = cudaEventRecord(
            impl.produced, static_cast<cudaStream_t>(producer_stream));
        e != cudaSuccess) {
      return CudaError("EventRecord on the producer's stream", e);
    }
    if (cudaError_t e = cudaStreamWaitEvent(impl.stream, impl.produced, 0);
        e != cudaSuccess) {
      return CudaError("StreamWaitEvent", e);
    }
  }
  return AllReduce(data);
}

absl::Status NcclAllReduce::AllReduceHost(absl::Span<float> host) {
  Impl& impl = *impl_;
  if (absl::Status s = impl.BreakIfAborted(); !s.ok()) return s;
  if (!impl.broken.ok()) return impl.broken;
  if (cudaError_t e = cudaSetDevice(impl.device); e != cudaSuccess) {
    return CudaError("SetDevice", e);
  }
  if (impl.staging_floats < host.size()) {
    if (impl.staging != nullptr) cudaFree(impl.staging);
    impl.staging = nullptr;
    impl.staging_floats = 0;
    if (cudaError_t e = cudaMalloc(&impl.staging, host.size() * sizeof(float));
        e != cudaSuccess) {
      return CudaError("Malloc (all-reduce staging buffer)", e);
    }
    impl.staging_floats = host.size();
  }
  if (impl.pinned_floats < host.size()) {
    if (impl.pinned != nullptr) cudaFreeHost(impl.pinned);
    impl.pinned = nullptr;
    impl.pinned_floats = 0;
    if (cudaError_t e = cudaHostAlloc(&impl.pinned, host.size() * sizeof(float),
                                      cudaHostAllocDefault);
        e != cudaSuccess) {
      return CudaError("HostAlloc (all-reduce pinned buffer)", e);
    }
    impl.pinned_floats = host.size();
  }
  const size_t bytes = host.size() * sizeof(float);
  std::memcpy(impl.pinned, host.data(), bytes);
  // The copy is ordered before the all-reduce on the same stream, and
  // AllReduce waits for the stream.
  if (cudaError_t e = cudaMemcpyAsync(impl.staging, impl.pinned, bytes,
                                      cudaMemcpyHostToDevice, impl.stream);
      e != cudaSuccess) {
    return CudaError("MemcpyAsync to the device", e);
  }
  if (absl::Status s = AllReduce(absl::MakeSpan(impl.staging, host.size()));
      !s.ok()) {
    return s;
  }
  if (cudaError_t e = cudaMemcpyAsync(impl.pinned, impl.staging, bytes,
                                      cudaMemcpyDeviceToHost, impl.stream);
      e != cudaSuccess) {
    return CudaError("MemcpyAsync to the host", e);
  }
  if (cudaError_t e = cudaStreamSynchronize(impl.stream); e != cudaSuccess) {
    return CudaError("StreamSynchronize", e);
  }
  std::memcpy(host.data(), impl.pinned, bytes);
  return absl::OkStatus();
}

}  // namespace tessera
