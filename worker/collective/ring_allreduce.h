#ifndef TESSERA_WORKER_COLLECTIVE_RING_ALLREDUCE_H_
#define TESSERA_WORKER_COLLECTIVE_RING_ALLREDUCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/transport_limits.h"
#include "grpcpp/server_builder.h"
#include "worker/collective/all_reducer.h"
#include "worker/collective/ring_receiver.h"
#include "worker/collective/ring_transport.h"

namespace tessera {

struct RingAllReduceOptions {
  // Largest piece of a segment in one message. Ranks may differ.
  int64_t chunk_bytes = kDefaultChunkBytes;
  // Deadline of one whole AllReduce call.
  double timeout_s = kDefaultRpcTimeoutS;
  // The job's token and TLS: the channel to the right neighbour carries
  // them, and the receiver accepts only streams with the same token.
  ChannelSecurity security;
  // What carries the chunks: Collective.Exchange streams, or data plane
  // connections (worker/collective/ring_wire.h) whose port each rank
  // announces through Collective.DataPlane. Every rank must use the same.
  DataPlaneKind data_plane = DataPlaneKind::kGrpc;
};

// Rank `rank` of a ring all-reduce over gRPC between `num_ranks` peers
// (worker/collective/ring_schedule.h has the algorithm): reduce-scatter then
// all-gather, n - 1 steps each, the buffer cut into n segments and each
// segment into chunks that are pipelined: a rank forwards chunk k of a
// step as soon as it has reduced chunk k of the step before, while it is
// still receiving chunk k + 1 from its left neighbour. Each call streams
// to the right neighbour once (Collective.Exchange); the receiving side
// is the RingReceiver registered on this rank's server.
//
// The sum of every element is computed in one documented order (the ring
// order starting at the segment's own rank) by one rank and copied to the
// others, so every rank ends with the same bits. n == 1 is a no-op.
//
// How the chunks travel is the RingTransport chosen once, in Create, from
// options.data_plane (ring_transport.h): the Exchange stream above
// (GrpcRingTransport) or, with DataPlaneKind::kTcp, frames on one TCP
// connection kept from call to call (TcpRingTransport: the job token proved
// by the data plane handshake, TLS when `security` has it), with the same
// errors: a cut connection is UNAVAILABLE, a stall past the deadline
// DEADLINE_EXCEEDED.
//
// Use: construct, RegisterService on the rank's ServerBuilder (it can be
// the worker's own server), start the server, SetPeers with every rank's
// address, then AllReduce on every rank.
//
// Thread safety: AllReduce must not be called concurrently; the service
// runs on gRPC's threads. The server must be shut down before the object
// is destroyed.
class RingAllReduce final : public AllReducer {
 public:
  // InvalidArgument unless num_ranks >= 1 and 0 <= rank < num_ranks.
  static absl::StatusOr<std::unique_ptr<RingAllReduce>> Create(
      int rank, int num_ranks, RingAllReduceOptions options = {});

  RingAllReduce(const RingAllReduce&) = delete;
  RingAllReduce& operator=(const RingAllReduce&) = delete;

  // Adds the Collective service; call before builder->BuildAndStart().
  void RegisterService(grpc::ServerBuilder* builder);

  // The address (host:port) of every rank, in rank order. Channels are
  // made here (connected lazily). InvalidArgument unless there are
  // num_ranks of them.
  absl::Status SetPeers(std::vector<std::string> peers);

  // Connections this rank opened to its right neighbour (kTcp): one for
  // many calls, a new one after an error or a Restart.
  int64_t connections_opened() const {
    return transport_->connections_opened();
  }

  // The port of the data plane listener (kTcp); 0 with kGrpc.
  int data_plane_port() const { return transport_->port(); }

  ~RingAllReduce() override;

  int rank() const override { return rank_; }
  int num_ranks() const override { return num_ranks_; }
  Memory memory() const override { return Memory::kHost; }

  // AllReducer. FailedPrecondition before SetPeers. A peer that is down,
  // or does not take part within the deadline, gives an error naming it
  // (Unavailable, DeadlineExceeded); buffers of different sizes give
  // InvalidArgument on the ranks that see the difference and an error on
  // the others. After an error every rank should stop using the ring.
  absl::Status AllReduce(absl::Span<float> data) override;
  void Abort(const absl::Status& why) override;
  // Fails the call in progress at once with `why` (its waits for the left
  // neighbour, and its sending to a right one that does not read or
  // answer) and every later one, for good.
  void Shutdown(const absl::Status& why) override;
  // Ends an abort (not a Shutdown). InvalidArgument when `epoch` is below the
  // calls this rank made.
  absl::Status Restart(uint64_t epoch) override;
  // The ring re-formed between calls: this is rank `rank` of
  // peers.size(), `peers` every rank's address in ring order, and the
  // calls count from `epoch` as after Restart. InvalidArgument for a rank
  // out of range, too many ranks for the TCP data plane, or an epoch below
  // the calls made; nothing changes then.
  absl::Status Reform(int rank, std::vector<std::string> peers,
                      uint64_t epoch) override;
  bool can_reform() const override { return true; }

 private:
  RingAllReduce(int rank, int num_ranks, RingAllReduceOptions options);
  std::string PeerName(int rank) const;

  int rank_;  // Reform changes both
  int num_ranks_;
  const RingAllReduceOptions options_;
  std::vector<std::string> peers_;
  std::unique_ptr<RingReceiver> receiver_;
  uint64_t generation_ = 0;
  // After the receiver: a transport's threads use it, and go first.
  std::unique_ptr<RingTransport> transport_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_RING_ALLREDUCE_H_
