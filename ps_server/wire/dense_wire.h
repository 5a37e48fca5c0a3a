// What dense pulls and pushes look like on the data plane (frames:
// common/data_plane/frame.h). Both ends include this; nothing here does
// I/O.
//
// PullDense request: kPullDense, count = shards, bytes = the table:
//     per shard its name (String16).
//   reply: kPullDenseReply, count = shards, bytes = what follows: per
//     shard a 16-byte part header (version, value bytes; int64 each) and
//     the values, raw float32. An unknown shard gives an error reply
//     before any value.
//
// PushDense request: kPushDense, count = shards, bytes = the table: per
//     shard its name (String16), the version the gradient was computed
//     from (Int64) and its gradient bytes (Int64); then, after the table,
//     the gradients, raw float32, in table order. The table is the push's
//     declaration: the server reads exactly those bytes and applies
//     nothing unless every one arrived and all are valid. With flag
//     kFrameSyncPush: a sync push (ps_server/wire/sync_push.h tags it).
//   reply: kPushDenseReply, bytes = a serialized PushResponse.
#ifndef TESSERA_PS_SERVER_WIRE_DENSE_WIRE_H_
#define TESSERA_PS_SERVER_WIRE_DENSE_WIRE_H_

#include <cstdint>
#include <cstring>

namespace tessera {

inline constexpr size_t kDensePartHeaderBytes = 16;

inline void EncodeDensePartHeader(int64_t version, int64_t bytes, char* out) {
  std::memcpy(out, &version, 8);
  std::memcpy(out + 8, &bytes, 8);
}

inline void DecodeDensePartHeader(const char* in, int64_t* version,
                                  int64_t* bytes) {
  std::memcpy(version, in, 8);
  std::memcpy(bytes, in + 8, 8);
}

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_WIRE_DENSE_WIRE_H_
