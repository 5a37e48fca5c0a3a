#ifndef TESSERA_WORKER_COLLECTIVE_RING_TRANSPORT_H_
#define TESSERA_WORKER_COLLECTIVE_RING_TRANSPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/rpc/grpc_channel.h"
#include "worker/collective/ring_receiver.h"

namespace tessera {

// What a transport knows of its rank's place in the ring.
struct RingLink {
  int rank = 0;
  int num_ranks = 1;
  // Floats in one message at most.
  int64_t chunk_elements = 1;
  // Deadline of one whole AllReduce call.
  double timeout_s = 0;
  // The job's token and TLS, on every connection to the right neighbour.
  ChannelSecurity security;
  // This rank's receiving half; it outlives the transport.
  RingReceiver* receiver = nullptr;
};

// How one rank's chunks of a ring all-reduce travel to its right
// neighbour. RingAllReduce picks one transport at construction (from
// RingAllReduceOptions::data_plane) and sends every call through it, so
// the ring's algorithm never sees which one it is; the receiving half is
// the RingReceiver either way (its Exchange streams, or ServeTcp for
// connections a transport's listener takes).
// Implementations: GrpcRingTransport (ring_grpc_transport.h) and
// TcpRingTransport (the TCP data plane, ring_tcp_transport.h). A new one is
// one implementation of this interface plus its receiving end in
// RingReceiver.
//
// Thread safety: SetRight, Send and Reset are called by the one thread that
// calls AllReduce, never concurrently; ShutDown from any thread; a
// transport's own threads (a listener) only hand connections to the
// receiver.
class RingTransport {
 public:
  virtual ~RingTransport() = default;

  // The right neighbour listens at `address` (host:port of its gRPC
  // server); `name` names it in errors ("rank 2 (host:port)"). Called by
  // SetPeers, before the first Send.
  virtual void SetRight(const std::string& address,
                        const std::string& name) = 0;

  // Streams this rank's chunks of `call` (from `data`, the call's buffer)
  // to the right neighbour in the schedule's order; from step 1 on a chunk
  // goes once the receiver has reduced (or copied) it here. Returns the
  // call's first error, this side's or the right neighbour's, as
  // RingReceiver::Fail does: Unavailable for a cut connection,
  // DeadlineExceeded past `deadline`, each naming the peer.
  virtual absl::Status Send(RingCall* call, absl::Span<const float> data,
                            absl::Time deadline) = 0;

  // The neighbours may have restarted (RingAllReduce::Restart): what the
  // transport kept of the right one (a connection, a port) is dropped.
  virtual void Reset() = 0;

  // The ring was re-formed (RingAllReduce::Reform): this rank is `rank` of
  // `num_ranks` from the next call on, and the right neighbour may be
  // another (SetRight follows). Called between calls. Errors: what this
  // rank's receiving end needs for a larger ring cannot start (a listener).
  virtual absl::Status Reform(int rank, int num_ranks) = 0;

  // The rank is stopping (RingAllReduce::Shutdown; its receiver has failed
  // the call first): a Send blocked on the right neighbour (a write it
  // does not read, an answer it does not give) returns at once, and so
  // does every later one, with the call's error. Any thread, for good.
  virtual void ShutDown() = 0;

  // Connections opened to the right neighbour (the data plane); 0 for
  // transports that keep none of their own.
  virtual int64_t connections_opened() const { return 0; }
  // The port of this rank's data plane listener; 0 when it has none.
  virtual int port() const { return 0; }
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_RING_TRANSPORT_H_
