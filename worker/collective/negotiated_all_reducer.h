#ifndef TESSERA_WORKER_COLLECTIVE_NEGOTIATED_ALL_REDUCER_H_
#define TESSERA_WORKER_COLLECTIVE_NEGOTIATED_ALL_REDUCER_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/collective/all_reducer.h"

namespace tessera {

// Makes the NCCL all-reducer of `rank` of `num_ranks` from the unique id
// rank 0 made; its AllReduce takes host buffers (staging them through the
// GPU), its AllReduceOnDevice (on_device()) the GPU's own.
using NcclFactory = std::function<absl::StatusOr<std::unique_ptr<AllReducer>>(
    int rank, int num_ranks, const std::string& unique_id)>;
// Makes a new NCCL unique id (rank 0 only).
using NcclIdMaker = std::function<absl::StatusOr<std::string>()>;

struct NcclChoice {
  // This worker's CUDA device index, or -1 when it trains on the CPU.
  int cuda_device = -1;
  // Null when this build has no NCCL.
  NcclFactory make;
  NcclIdMaker new_id;
  // Loads NCCL on this node, called only by a worker with a GPU when the
  // group negotiates: an error (no libnccl.so.2 here) makes it vote for
  // the ring, saying why. Null: nothing to load.
  std::function<absl::Status()> load;
};

// The NCCL communicator's init deadline in a group whose ring waits
// `timeout_s`: half of it. A rank whose join fails at once waits in the
// ring's "joined" vote; were init's deadline the ring's, that wait would
// run out just as the other ranks' init gave up, and the first step would
// fail instead of every rank falling back to the ring.
double NcclInitTimeout(double timeout_s);

// The NcclChoice of this build for a worker on `cuda_device` (-1: CPU):
// NCCL (worker/collective/nccl_allreduce.h) when it is built in and the
// node has it, waiting at most `timeout_s` for the other ranks in each
// all-reduce (NcclInitTimeout(timeout_s) to join).
NcclChoice DefaultNcclChoice(int cuda_device, double timeout_s);

// The all-reducer of a mirrored job: NCCL when every worker has a GPU and
// NCCL, else the ring over gRPC. Workers cannot know each other's devices
// before the job starts, so the first AllReduce (which every rank makes,
// in step) first sums, through the ring, each rank's vote (1 when it has a
// GPU and NCCL) and rank 0's NCCL unique id (as 128 small integers, exact
// in floats); when every rank voted, each joins the NCCL communicator and
// a second vote confirms that all of them did, else all stay on the ring.
// Either way every rank takes the same path, and the log says which and
// why. A rank that cannot use NCCL never tries to join it, whatever the
// votes say; a vote sum that is not a count in [0, n] (or an id byte out
// of range) makes the first AllReduce fail with DataLoss on every rank.
// Once every rank is on NCCL, on_device() says so and AllReduceOnDevice
// sums GPU memory where it is (the gradients where the backend left
// them); AllReduce keeps taking host memory either way.
//
// Thread safety: as AllReducer, AllReduce is not called concurrently.
class NegotiatedAllReducer final : public AllReducer {
 public:
  // `ring` (not owned) must outlive this.
  NegotiatedAllReducer(AllReducer* ring, NcclChoice nccl);

  int rank() const override { return ring_->rank(); }
  int num_ranks() const override { return ring_->num_ranks(); }
  Memory memory() const override { return Memory::kHost; }

  absl::Status AllReduce(absl::Span<float> data) override;
  // Reaches the ring and, once the group is on it, NCCL: survivors of a
  // failed step stop waiting at once on either.
  void Abort(const absl::Status& why) override;
  // As Abort, for good: the ring refuses every later call, negotiating
  // included, so NCCL is never joined again.
  void Shutdown(const absl::Status& why) override;
  // Leaves NCCL, aborting its communicator (a peer may be dead, and
  // finalizing would wait for it; a restarted rank has no communicator),
  // and the ring starts over; the next AllReduce negotiates again.
  absl::Status Restart(uint64_t epoch) override;
  // As Restart, the ring re-formed with the new members: the next
  // AllReduce negotiates again, so a new NCCL communicator of the new
  // size is made when every member votes for it.
  absl::Status Reform(int rank, std::vector<std::string> peers,
                      uint64_t epoch) override;
  bool can_reform() const override { return true; }

  // False until the first AllReduce, then whether the NCCL group sums
  // device memory.
  bool on_device() const override {
    return nccl_ != nullptr && nccl_->on_device();
  }
  absl::Status AllReduceOnDevice(absl::Span<float> data,
                                 void* producer_stream) override;

  // After the first AllReduce: whether NCCL carries the sums.
  bool using_nccl() const { return nccl_ != nullptr; }

 private:
  absl::Status Negotiate();
  // Leaves NCCL (Restart, Reform).
  void LeaveNccl();

  AllReducer* const ring_;
  NcclChoice choice_;
  bool negotiated_ = false;
  // Set and reset by the owning thread under abort_mu_, which Abort takes
  // to reach it from another thread; the owner reads it without.
  std::mutex abort_mu_;
  std::unique_ptr<AllReducer> nccl_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_NEGOTIATED_ALL_REDUCER_H_
