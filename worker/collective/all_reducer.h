#ifndef TESSERA_WORKER_COLLECTIVE_ALL_REDUCER_H_
#define TESSERA_WORKER_COLLECTIVE_ALL_REDUCER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tessera {

// Sums a buffer of floats element-wise across the n ranks of a group (the
// workers of a mirrored job), leaving the sum in every rank's buffer. The
// ring all-reduce over gRPC (worker/collective/ring_allreduce.h) and NCCL
// (worker/collective/nccl_allreduce.h) implement it.
//
// Every rank must call AllReduce the same number of times, in the same
// order, with buffers of the same size; an implementation reports a
// mismatch as an error rather than mixing data. Afterwards every rank's
// buffer holds bit-identical values (the implementations add in one fixed
// order and copy the result), so replicas that apply the same update stay
// identical. The caller scales (for a mean, divide by num_ranks()).
//
// Thread safety: AllReduce must not be called concurrently on one object.
class AllReducer {
 public:
  // Where the buffer given to AllReduce must live.
  enum class Memory { kHost, kDevice };

  virtual ~AllReducer() = default;

  virtual int rank() const = 0;
  virtual int num_ranks() const = 0;
  virtual Memory memory() const = 0;

  // Replaces `data` by the element-wise sum of every rank's `data`. On
  // error (a peer down or too slow, sizes that differ between ranks) the
  // contents of `data` are unspecified and the message names the peer.
  virtual absl::Status AllReduce(absl::Span<float> data) = 0;

  // Fails the AllReduce in progress, if any, and every later one until
  // Restart, at once, with `why`: another member gave the step up, so
  // waiting for it would last until the deadline. Safe to call from any
  // thread, concurrently with AllReduce. The default, for a group that
  // cannot, lets the call run to its deadline.
  virtual void Abort(const absl::Status& why) {}

  // As Abort, for good: Restart and Reform do not end it. For a process
  // that is stopping (a signal, the chief's Shutdown), whose step must not
  // wait out the all-reduce deadline before the process can exit. The
  // default, for a group that cannot start over anyway, is Abort.
  virtual void Shutdown(const absl::Status& why) { Abort(why); }

  // Starts the group over after a failure: every rank calls it with the
  // same `epoch`, larger than the number of calls any rank made, before
  // its next AllReduce, so that a rank that restarted (its count back at
  // 0) and ranks that went on count their calls alike again.
  // Unimplemented for a group that cannot start over.
  virtual absl::Status Restart(uint64_t epoch) {
    return absl::UnimplementedError(
        "this all-reduce cannot start over after a failure");
  }

  // The group's members changed between calls (a worker joined or left a
  // mirrored or hybrid job): this is rank `rank` of peers.size(), `peers`
  // every rank's address in rank order, and the calls start over at
  // `epoch` as with Restart. Every member calls it with the same peers
  // and epoch before its next AllReduce. Unimplemented for a group of
  // fixed size.
  virtual absl::Status Reform(int rank, std::vector<std::string> peers,
                              uint64_t epoch) {
    return absl::UnimplementedError(
        "this all-reduce cannot change its members");
  }
  // Whether Reform can change the members: a chief may then put this rank
  // on another ring than the one it started with. False for a group of
  // fixed size, whose rank and size are those it started with.
  virtual bool can_reform() const { return false; }

  // Whether AllReduceOnDevice may be called now: true for a group that
  // sums device memory itself (NCCL between GPUs), and for the negotiated
  // group once its ranks agreed on NCCL. Every rank of a group gives the
  // same answer between the same two calls.
  virtual bool on_device() const { return false; }

  // As AllReduce, for `data` in the memory of this rank's device, written
  // by ops queued on `producer_stream` (Backend::native_stream(): a CUDA
  // stream, or null when those ops have finished): the sum starts after
  // them without the host waiting for them (the collective's stream waits
  // on an event), and AllReduceOnDevice returns once the sum is in `data`.
  // REQUIRES: on_device().
  virtual absl::Status AllReduceOnDevice(absl::Span<float> data,
                                         void* producer_stream) {
    return absl::FailedPreconditionError(
        "this all-reduce sums host memory only");
  }
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_ALL_REDUCER_H_
