#ifndef TESSERA_WORKER_COLLECTIVE_NCCL_ALLREDUCE_H_
#define TESSERA_WORKER_COLLECTIVE_NCCL_ALLREDUCE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/collective/all_reducer.h"

namespace tessera {

// True when this build has the NCCL all-reduce (nvcc and nccl.h were found
// at configure time); false in the CPU-only twin, where every call below is
// Unavailable. NCCL itself is no dependency of the binary: it is loaded
// from the node when first used (nccl_library.h).
bool NcclBuilt();

// Loads NCCL if it was not yet (nccl_library.h): OK when it could be, else
// why not (not built in, or no libnccl.so.2 on this node). NewUniqueId and
// Create fail with the same status.
absl::Status NcclLoadable();

// The all-reduce between GPUs of a mirrored job when every worker has one:
// one NCCL communicator of num_ranks ranks, a CUDA stream of its own, and
// ncclAllReduce (sum, float32) on device buffers. NCCL computes each
// element once (ring or tree) and broadcasts it, so all ranks end with the
// same bits.
//
// Thread safety: AllReduce must not be called concurrently.
class NcclAllReduce final : public AllReducer {
 public:
  // A new NCCL unique id (opaque bytes). Rank 0 makes it and every rank
  // gets the same bytes out of band (for example from the coordinator)
  // before Create.
  static absl::StatusOr<std::string> NewUniqueId();

  // Joins the communicator named by `unique_id` as `rank` of `num_ranks`,
  // on CUDA device `device`. Blocks until every rank has joined, at most
  // `init_timeout_s` seconds (DeadlineExceeded then; negative: timeout_s).
  // `timeout_s` bounds each later all-reduce and the teardown.
  static absl::StatusOr<std::unique_ptr<NcclAllReduce>> Create(
      int rank, int num_ranks, const std::string& unique_id, int device,
      double timeout_s, double init_timeout_s = -1);

  NcclAllReduce(const NcclAllReduce&) = delete;
  NcclAllReduce& operator=(const NcclAllReduce&) = delete;
  ~NcclAllReduce() override;

  int rank() const override { return rank_; }
  int num_ranks() const override { return num_ranks_; }
  Memory memory() const override { return Memory::kDevice; }

  // `data` is device memory on this object's device. Waits for the result
  // at most timeout_s; a rank that does not take part in time, or a NCCL
  // error, aborts the communicator (every later call fails).
  absl::Status AllReduce(absl::Span<float> data) override;

  // From any thread: the all-reduce in progress fails within a poll (its
  // own thread aborts the communicator, so no NCCL call races another),
  // and so does every later one; the destructor then aborts instead of
  // waiting in ncclCommFinalize for peers that may be gone.
  void Abort(const absl::Status& why) override;

  bool on_device() const override { return true; }

  // As AllReduce, after the work queued so far on `producer_stream` (a
  // cudaStream_t on this object's device, e.g. the CUDA backend's; null:
  // none): an event recorded there is waited for by this object's stream,
  // so the host does not wait between the producer and the sum.
  absl::Status AllReduceOnDevice(absl::Span<float> data,
                                 void* producer_stream) override;

  // As AllReduce, for `host` in host memory: copied through a pinned host
  // buffer into a device buffer (both kept by this object and grown as
  // needed), reduced, and copied back the same way. The fallback for
  // gradients that are on the host anyway; AllReduceOnDevice avoids it.
  absl::Status AllReduceHost(absl::Span<float> host);

 private:
  struct Impl;  // NCCL and CUDA handles; only nccl_allreduce.cu knows them
  NcclAllReduce(int rank, int num_ranks, std::unique_ptr<Impl> impl);

  const int rank_;
  const int num_ranks_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_NCCL_ALLREDUCE_H_
