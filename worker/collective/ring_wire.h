// The ring all-reduce's frames on the data plane (--data_plane=tcp), one
// call per connection from a rank to its right neighbour, in the order
// Collective.Exchange streams the same fields (common/data_plane/frame.h
// has the header layout):
//
//   kRingHeader  a: generation, b: num_elements, count: num_ranks;
//                payload: the sender's rank (8 bytes)
//   kRingChunk   a: generation, b: offset (elements), count: step,
//                flags: segment; payload: float32 values, at most a chunk
//   kRingReply   receiver -> sender once everything has arrived (code 0),
//                or the reason it gave up (then the connection closes)
//
// A connection for a call the receiver has not begun yet waits, unread,
// as a parked Exchange stream does; TCP's flow control holds the sender.
#ifndef TESSERA_WORKER_COLLECTIVE_RING_WIRE_H_
#define TESSERA_WORKER_COLLECTIVE_RING_WIRE_H_

#include <cstdint>

namespace tessera {

// Bytes of a kRingHeader payload.
inline constexpr int64_t kRingHeaderPayloadBytes = 8;
// A chunk's segment travels in the 16-bit flags.
inline constexpr int kMaxRingTcpRanks = 65535;

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_RING_WIRE_H_
