// What sparse row pulls and pushes look like on the data plane (frames:
// common/data_plane/frame.h). Both ends include this; nothing here does
// I/O. Rows are addressed by their id in the whole variable, as on the
// gRPC path (ps_server/row_reactors.h).
//
// PullRows request: kPullRows, count = shards, bytes = the table: per
//     shard its name (String16), its floats per row (Int64) and its number
//     of ids (Int64); then, after the table, each shard's ids, raw int64,
//     in table order. The table declares those bytes.
//   reply: kPullRowsReply, count = shards, bytes = what follows: per shard
//     a 16-byte part header (version, value bytes; dense_wire.h's) and its
//     rows in the part's precision (below), in request order. Any refused
//     shard (unknown, wrong row size, an id it does not hold, a precision
//     it cannot serve) gives an error reply before any value.
//
// PushRows request: kPushRows, count = shards, bytes = the table: per
//     shard its name (String16), its values per row (Int64) and its number
//     of rows (Int64); then, per shard in table order, its ids (raw int64)
//     and its gradient rows in the part's precision. The server reads
//     exactly the declared bytes and applies nothing unless every one arrived
//     and all are valid; a shard named twice is one push of all its rows,
//     repeated ids summed (SumDuplicateIds), as on the gRPC path.
//   reply: kPushRowsReply, bytes = a serialized PushResponse.
//
// Precisions: with kFrameRowPrecisions in the request's flags, each
//     shard's entry in the table ends with one more Int64, the RowPrecision
//     (proto/job.proto) its values travel in: a pull's rows as ROW_FP32
//     (widened by the server) or as the table stores them (ROW_FP16,
//     ROW_BF16: 2 bytes each, the stored bits), a push's gradients in any
//     of the three (widened to fp32 by the server, which is exact). Without
//     the flag every value is raw float32.
#ifndef TESSERA_PS_SERVER_WIRE_ROW_WIRE_H_
#define TESSERA_PS_SERVER_WIRE_ROW_WIRE_H_

#include <cstdint>

namespace tessera {

// No request declares more rows of one shard, or floats per row: the
// server refuses larger tables before reading anything after them.
inline constexpr int64_t kMaxWireRows = int64_t{1} << 31;
inline constexpr int64_t kMaxWireRowElements = int64_t{1} << 20;

// A flag of kPullRows and kPushRows (common/data_plane/frame.h's flags are
// per op): the table gives each shard's precision.
inline constexpr uint16_t kFrameRowPrecisions = 4;

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_WIRE_ROW_WIRE_H_
