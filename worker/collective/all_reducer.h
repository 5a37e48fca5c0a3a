#ifndef TESSERA_WORKER_COLLECTIVE_ALL_REDUCER_H_
#define TESSERA_WORKER_COLLECTIVE_ALL_REDUCER_H_

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
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_ALL_REDUCER_H_
