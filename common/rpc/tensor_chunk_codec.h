#ifndef TESSERA_COMMON_TENSOR_CHUNK_CODEC_H_
#define TESSERA_COMMON_TENSOR_CHUNK_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace tessera {

// The TensorChunk message (proto/tensor.proto) on the wire, encoded and
// parsed by hand so that its bulk `data` field never passes through a
// std::string: a sender hands the bytes to gRPC by reference, a receiver
// copies them once from gRPC's slices to where they belong. The bytes are
// exactly those of TensorChunk, so generated stubs and parsers interoperate
// (TensorFlow's grpc_tensor_coding.cc does the same for its tensors).

// Every field of a TensorChunk but `data`.
struct TensorChunkHeader {
  std::string name;         // field 1
  int64_t offset = 0;       // field 2
  int64_t total_bytes = 0;  // field 3
  int64_t version = 0;      // field 4
};

// A parsed chunk whose data stays where it arrived: `data` are views, in
// order, of the pieces of the wire bytes that hold field 15.
struct TensorChunkView {
  TensorChunkHeader header;
  std::vector<absl::string_view> data;
  int64_t data_bytes = 0;  // the sum of the pieces' sizes

  // Copies the data bytes, in order, to dst[0, data_bytes).
  void CopyDataTo(char* dst) const;
};

// Parses one TensorChunk given as consecutive pieces of its wire bytes (a
// field may be split anywhere between pieces). Accepts everything the
// generated parser does for a TensorChunk: fields in any order, repeated
// fields (the last wins), unknown fields (skipped). InvalidArgument naming
// the field and byte position on malformed bytes: a truncated varint or
// length, a known field with the wrong wire type, a group, field 0.
// `chunk` is overwritten; its views point into `wire`'s pieces, so they are
// valid as long as those are.
absl::Status ParseTensorChunk(absl::Span<const absl::string_view> wire,
                              TensorChunkView* chunk);

// Appends the wire bytes of a TensorChunk with `header` and `data_bytes`
// bytes of data, up to but excluding the data itself: appending those
// bytes completes a message identical to TensorChunk::SerializeToString's
// (default fields omitted, data last). REQUIRES: data_bytes >= 0.
void AppendTensorChunkPrefix(const TensorChunkHeader& header,
                             int64_t data_bytes, std::string* out);

// A TensorChunk as a grpc::ByteBuffer of two slices: the prefix, and
// `data`, which is referenced, not copied (an empty slice adds nothing).
grpc::ByteBuffer MakeTensorChunkBuffer(const TensorChunkHeader& header,
                                       const grpc::Slice& data);

// Parses TensorChunks received as grpc::ByteBuffers without copying their
// data; the views of chunk() hold on to the buffer's slices until the next
// Parse or Clear. Reuse one parser per stream so its vectors are reused.
//
// Thread safety: none; one parser per thread or stream.
class TensorChunkParser {
 public:
  TensorChunkParser() = default;
  TensorChunkParser(const TensorChunkParser&) = delete;
  TensorChunkParser& operator=(const TensorChunkParser&) = delete;

  // As ParseTensorChunk, on the slices of `buffer`.
  absl::Status Parse(const grpc::ByteBuffer& buffer);
  const TensorChunkView& chunk() const { return chunk_; }
  // Drops the references to the last buffer's slices.
  void Clear();

 private:
  std::vector<grpc::Slice> slices_;
  std::vector<absl::string_view> pieces_;
  TensorChunkView chunk_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_TENSOR_CHUNK_CODEC_H_
