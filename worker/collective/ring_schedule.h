#ifndef TESSERA_WORKER_COLLECTIVE_RING_SCHEDULE_H_
#define TESSERA_WORKER_COLLECTIVE_RING_SCHEDULE_H_

#include <cstdint>

namespace tessera {

// Which part of the buffer a rank of a ring all-reduce sends and receives
// at each step. The buffer of num_elements floats is cut into num_ranks
// segments, the first num_elements % num_ranks of them one element longer
// (so some are empty when num_elements < num_ranks). Rank r sends to rank
// r + 1 and receives from rank r - 1 (mod n).
//
// Steps 0 .. n-2 are the reduce-scatter: at step s rank r sends segment
// r - s and adds what it receives, segment r - s - 1, into its own. Steps
// n-1 .. 2n-3 are the all-gather: the same segment arithmetic, but what is
// received replaces the local values. So segment j is summed as
//
//   ((x_j + x_{j+1}) + x_{j+2}) + ... + x_{j+n-1}     (ranks mod n)
//
// by rank j + n - 1, which then hands the finished sum around, and every
// rank ends with the same bits. The segment sent at step s + 1 is the one
// received at step s, which lets chunks be pipelined across steps.
class RingSchedule {
 public:
  // REQUIRES: num_ranks >= 1, 0 <= rank < num_ranks, num_elements >= 0.
  RingSchedule(int num_ranks, int rank, int64_t num_elements);

  int num_ranks() const { return num_ranks_; }
  int rank() const { return rank_; }
  int64_t num_elements() const { return num_elements_; }
  int num_steps() const { return 2 * (num_ranks_ - 1); }

  int SendSegment(int step) const { return Mod(rank_ - step); }
  int RecvSegment(int step) const { return Mod(rank_ - step - 1); }
  // Whether what is received at `step` is added (else it is copied).
  bool Reduces(int step) const { return step < num_ranks_ - 1; }

  int64_t SegmentBegin(int segment) const;
  int64_t SegmentSize(int segment) const;

 private:
  int Mod(int x) const { return ((x % num_ranks_) + num_ranks_) % num_ranks_; }

  const int num_ranks_;
  const int rank_;
  const int64_t num_elements_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_RING_SCHEDULE_H_
