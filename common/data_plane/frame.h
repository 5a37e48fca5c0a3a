// The data plane's frames: every request and reply starts with a fixed
// 40-byte header, then `bytes` bytes of payload whose layout the op
// defines. All integers are little-endian; tensor values are raw float32
// (common/byte_codec.h), so a payload goes from the sender's memory to the
// receiver's without any encoding.
//
//   offset  size  field
//        0     4  magic "TSDP"
//        4     2  op (FrameOp)
//        6     2  flags (op-specific)
//        8     4  code: absl::StatusCode of a reply (0 in requests)
//       12     4  count: shards (or rows) the frame is about
//       16     8  a: op-specific (a push or a sync pull: its step)
//       24     8  b: op-specific (a sync push: its parts and part)
//       32     8  bytes: payload bytes that follow
//
// A reply with code != 0 carries the error message as its payload, and
// nothing else.
#ifndef TESSERA_COMMON_DATA_PLANE_FRAME_H_
#define TESSERA_COMMON_DATA_PLANE_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/data_plane/socket.h"

namespace tessera {

enum class FrameOp : uint16_t {
  kPullDense = 1,
  kPullDenseReply = 2,
  kPushDense = 3,
  kPushDenseReply = 4,
  // Sparse rows (ps_server/wire/row_wire.h).
  kPullRows = 5,
  kPullRowsReply = 6,
  kPushRows = 7,
  kPushRowsReply = 8,
  // Ring all-reduce chunks (worker/collective/ring_tcp.h), one call per
  // connection: a header, the chunks in order, and the receiver's reply.
  kRingHeader = 9,
  kRingChunk = 10,
  kRingReply = 11,
};

struct FrameHeader {
  FrameOp op = FrameOp::kPullDense;
  uint16_t flags = 0;
  int32_t code = 0;
  uint32_t count = 0;
  int64_t a = 0;
  int64_t b = 0;
  int64_t bytes = 0;
};

inline constexpr size_t kFrameHeaderBytes = 40;
// Flags of kPushDense and kPushRows: a holds the sync step, b the parts it
// needs and this push's part (ps_server/wire/sync_push.h packs them).
inline constexpr uint16_t kFrameSyncPush = 1;
// Flags of kPullDense and kPullRows: a holds the sync step pulled for.
inline constexpr uint16_t kFrameSyncPull = 2;
// Flags of an asynchronous kPushDense and kPushRows: a holds the number of
// the worker step the gradients come from, for the learning-rate schedule
// (8: ps_server/wire/row_wire.h takes 4 for kPushRows).
inline constexpr uint16_t kFramePushStep = 8;
// The most bytes of request metadata (shard names and sizes) a server
// reads before the tensor bytes: a peer claiming more is not speaking this
// protocol, and is hung up on.
inline constexpr int64_t kMaxFrameTableBytes = int64_t{16} << 20;

void EncodeFrameHeader(const FrameHeader& header, char* out);
// InvalidArgument when the magic is wrong or `bytes` is negative.
absl::Status DecodeFrameHeader(const char* in, FrameHeader* header);

absl::Status ReadFrameHeader(Socket& socket, FrameHeader* header);
// The same on an idle connection: waits for the first byte as long as it
// takes (Socket::ReadFullAfterIdle).
absl::Status ReadNextFrameHeader(Socket& socket, FrameHeader* header);
// Reads a header that must be `op`; a reply carrying an error is read in
// full and returned as that error (the connection stays usable). *in_step
// (when given) is true only when the stream is still in step: OK, or the
// server's coded error with its whole message read. Any other failure (a
// malformed header, a negative or oversized length, a read cut off) leaves
// the connection unusable.
absl::Status ReadReplyHeader(Socket& socket, FrameOp op, FrameHeader* header,
                             bool* in_step = nullptr);
// Writes a reply of op `op` carrying `error` (not OK).
absl::Status WriteErrorReply(Socket& socket, FrameOp op,
                             const absl::Status& error);

// Request metadata: strings with a 16-bit length and 64-bit integers.
void AppendString16(absl::string_view s, std::string* out);
void AppendInt64(int64_t v, std::string* out);

// Reads what the Append functions wrote; each returns false (and stays
// false) past the end.
class WireReader {
 public:
  explicit WireReader(absl::string_view data) : data_(data) {}
  bool ReadString16(std::string* out);
  bool ReadInt64(int64_t* out);
  bool done() const { return ok_ && data_.empty(); }

 private:
  absl::string_view data_;
  bool ok_ = true;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_FRAME_H_
