#ifndef TESSERA_COMMON_TRANSPORT_LIMITS_H_
#define TESSERA_COMMON_TRANSPORT_LIMITS_H_

#include <cstdint>

namespace tessera {

// Tensors larger than this travel as several chunks. 1 MiB keeps each
// message far from gRPC's and protobuf's limits and lets the receiver copy
// into its preallocated buffer while the next chunk is on the wire; the
// transport bench (bench/transport) measures the choice.
inline constexpr int64_t kDefaultChunkBytes = int64_t{1} << 20;

// The largest chunk any process sends; receivers accept this plus headroom
// for the message header, and nothing bigger.
inline constexpr int64_t kMaxChunkBytes = int64_t{4} << 20;
inline constexpr int64_t kMaxMessageBytes =
    kMaxChunkBytes + (int64_t{64} << 10);

}  // namespace tessera

#endif  // TESSERA_COMMON_TRANSPORT_LIMITS_H_
