// The hand-written TensorChunk wire codec against the generated protobuf
// code: identical bytes out, identical fields in, however gRPC splits the
// bytes into slices, and clear errors on malformed bytes.

#include "common/rpc/tensor_chunk_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/tensor.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TensorChunk MakeChunk(const std::string& name, int64_t offset, int64_t total,
                      int64_t version, const std::string& data) {
  TensorChunk chunk;
  chunk.set_name(name);
  chunk.set_offset(offset);
  chunk.set_total_bytes(total);
  chunk.set_version(version);
  chunk.set_data(data);
  return chunk;
}

TensorChunkHeader HeaderOf(const TensorChunk& chunk) {
  TensorChunkHeader header;
  header.name = chunk.name();
  header.offset = chunk.offset();
  header.total_bytes = chunk.total_bytes();
  header.version = chunk.version();
  return header;
}

std::string Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// `wire` cut at the given positions (ascending) into pieces.
std::vector<absl::string_view> Split(absl::string_view wire,
                                     const std::vector<size_t>& cuts) {
  std::vector<absl::string_view> pieces;
  size_t start = 0;
  for (size_t cut : cuts) {
    pieces.push_back(wire.substr(start, cut - start));
    start = cut;
  }
  pieces.push_back(wire.substr(start));
  return pieces;
}

std::string DataOf(const TensorChunkView& view) {
  std::string data(view.data_bytes, '\0');
  view.CopyDataTo(data.data());
  return data;
}

void ExpectSame(const TensorChunk& expected, const TensorChunkView& view) {
  EXPECT_EQ(view.header.name, expected.name());
  EXPECT_EQ(view.header.offset, expected.offset());
  EXPECT_EQ(view.header.total_bytes, expected.total_bytes());
  EXPECT_EQ(view.header.version, expected.version());
  EXPECT_EQ(view.data_bytes, static_cast<int64_t>(expected.data().size()));
  EXPECT_EQ(DataOf(view), expected.data());
}

std::vector<TensorChunk> Samples() {
  return {
      MakeChunk("dense_0/kernel/part_1", 4096, 40000, 7, Bytes(4096, 1)),
      MakeChunk("s", 0, 0, 0, ""),  // everything default but the name
      MakeChunk("", 0, 0, 0, ""),   // an empty message
      MakeChunk("big", int64_t{3} << 40, int64_t{1} << 41,
                std::numeric_limits<int64_t>::max(), Bytes(300, 2)),
      // Negative values travel as ten-byte varints.
      MakeChunk("neg", -1, -4096, std::numeric_limits<int64_t>::min(),
                Bytes(5, 3)),
      MakeChunk(std::string(200, 'n'), 128, 256, 1, Bytes(128, 4)),
  };
}

TEST(TensorChunkCodecTest, PrefixPlusDataIsTheGeneratedEncoding) {
  for (const TensorChunk& chunk : Samples()) {
    SCOPED_TRACE(chunk.ShortDebugString().substr(0, 80));
    std::string wire;
    AppendTensorChunkPrefix(HeaderOf(chunk), chunk.data().size(), &wire);
    wire += chunk.data();
    EXPECT_EQ(wire, chunk.SerializeAsString());
  }
}

TEST(TensorChunkCodecTest, ParsesTheGeneratedEncodingInOnePiece) {
  for (const TensorChunk& chunk : Samples()) {
    const std::string wire = chunk.SerializeAsString();
    const absl::string_view pieces[] = {wire};
    TensorChunkView view;
    ASSERT_TRUE(ParseTensorChunk(pieces, &view).ok());
    ExpectSame(chunk, view);
    if (!chunk.data().empty()) {
      // In place: the data is a view into the wire bytes.
      ASSERT_EQ(view.data.size(), 1u);
      EXPECT_EQ(view.data[0].data(),
                wire.data() + wire.size() - chunk.data().size());
    }
  }
}

// Every field, the data's length varint included, split between two
// pieces at every position, and three pieces around the data field.
TEST(TensorChunkCodecTest, FieldsSplitAcrossPiecesAtEveryByte) {
  const TensorChunk chunk =
      MakeChunk("layer/part_0", 1 << 20, 3 << 20, 99, Bytes(1000, 5));
  const std::string wire = chunk.SerializeAsString();
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    SCOPED_TRACE(cut);
    TensorChunkView view;
    ASSERT_TRUE(ParseTensorChunk(Split(wire, {cut}), &view).ok());
    ExpectSame(chunk, view);
  }
  const size_t data_start = wire.size() - chunk.data().size();
  for (size_t a = data_start - 3; a < wire.size(); a += 97) {
    for (size_t b = a; b <= wire.size(); b += 211) {
      TensorChunkView view;
      ASSERT_TRUE(ParseTensorChunk(Split(wire, {a, b}), &view).ok());
      ExpectSame(chunk, view);
    }
  }
}

TEST(TensorChunkCodecTest, DataSplitOverManyPiecesKeepsOrder) {
  const TensorChunk chunk = MakeChunk("x", 8, 4000, 2, Bytes(3000, 6));
  const std::string wire = chunk.SerializeAsString();
  std::vector<size_t> cuts;
  for (size_t p = 7; p < wire.size(); p += 7) cuts.push_back(p);
  std::vector<absl::string_view> pieces = Split(wire, cuts);
  // Empty pieces (gRPC may hand those out) change nothing.
  pieces.insert(pieces.begin() + 3, absl::string_view());
  pieces.push_back(absl::string_view());
  TensorChunkView view;
  ASSERT_TRUE(ParseTensorChunk(pieces, &view).ok());
  ExpectSame(chunk, view);
  EXPECT_GT(view.data.size(), 400u);
}

// What other encoders may produce: fields out of order, unknown fields of
// every wire type, a field repeated (the last one wins, as in protobuf).
TEST(TensorChunkCodecTest, AcceptsWhatTheGeneratedParserAccepts) {
  std::string wire;
  wire += std::string("\x7a\x03", 2) + "old";               // data, replaced
  wire += std::string("\x20\x05", 2);                       // version 5
  wire += std::string("\x0a\x01", 2) + "a";                 // name, replaced
  wire += std::string("\x28\x96\x01", 3);                   // field 5 varint
  wire += std::string("\x31", 1) + std::string(8, '\x01');  // field 6 fixed64
  wire += std::string("\x3d", 1) + std::string(4, '\x02');  // field 7 fixed32
  wire += std::string("\x42\x02", 2) + "zz";                // field 8 bytes
  wire += std::string("\xfa\x01\x01", 3) + "q";             // field 31 bytes
  wire += std::string("\x7a\x04", 2) + "data";              // data
  wire += std::string("\x0a\x04", 2) + "name";              // name
  wire += std::string("\x18\x80\x20", 3);                   // total 4096
  wire += std::string("\x10\x04", 2);                       // offset 4
  TensorChunk expected;
  ASSERT_TRUE(expected.ParseFromString(wire));
  EXPECT_EQ(expected.name(), "name");
  EXPECT_EQ(expected.data(), "data");
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    TensorChunkView view;
    absl::Status status = ParseTensorChunk(Split(wire, {cut}), &view);
    ASSERT_TRUE(status.ok()) << status;
    ExpectSame(expected, view);
  }
}

TEST(TensorChunkCodecTest, ReusedViewForgetsTheLastChunk) {
  const std::string first =
      MakeChunk("first", 4, 8, 3, "abcd").SerializeAsString();
  const std::string second = MakeChunk("2", 0, 0, 0, "").SerializeAsString();
  TensorChunkView view;
  const absl::string_view a[] = {first};
  ASSERT_TRUE(ParseTensorChunk(a, &view).ok());
  const absl::string_view b[] = {second};
  ASSERT_TRUE(ParseTensorChunk(b, &view).ok());
  EXPECT_EQ(view.header.name, "2");
  EXPECT_EQ(view.header.offset, 0);
  EXPECT_EQ(view.header.version, 0);
  EXPECT_EQ(view.data_bytes, 0);
  EXPECT_TRUE(view.data.empty());
}

struct Malformed {
  const char* what;
  std::string wire;
  const char* message;  // expected in the error
};

TEST(TensorChunkCodecTest, MalformedBytesGiveAClearError) {
  const std::string good = MakeChunk("n", 4, 8, 1, "abcd").SerializeAsString();
  const std::vector<Malformed> cases = {
      {"tag ends mid-varint", good + "\x80", "truncated field tag at byte 15"},
      {"varint ends", std::string("\x10\xff\xff", 3),
       "truncated varint of field 2 (offset) at byte 0"},
      {"varint of 11 bytes",
       std::string("\x18") + std::string(10, '\xff') + "\x01",
       "over-long (more than 10 bytes) varint of field 3 (total_bytes)"},
      {"length ends", std::string("\x0a\x04na", 4),
       "field 1 (name) needs 4 bytes but 2 remain at byte 0"},
      {"data cut short", good.substr(0, good.size() - 1),
       "field 15 (data) needs 4 bytes but 3 remain at byte 9"},
      {"length varint cut", std::string("\x7a\x80", 2),
       "truncated length of field 15 (data)"},
      {"huge length", std::string("\x7a\xff\xff\xff\xff\x0f", 6),
       "length 4294967295 of field 15 (data) is too large"},
      {"offset as bytes", std::string("\x12\x01x", 3),
       "field 2 (offset) has wire type 2, expected 0 at byte 0"},
      {"data as varint", good + "\x78\x01",
       "field 15 (data) has wire type 0, expected 2 at byte 15"},
      {"name as fixed32", std::string("\x0d\x01\x02\x03\x04", 5),
       "field 1 (name) has wire type 5, expected 2"},
      {"group", std::string("\x2b\x2c", 2), "group (wire type 3) in field 5"},
      {"end group", std::string("\x2c", 1), "group (wire type 4) in field 5"},
      {"wire type 7", std::string("\x2f", 1), "invalid wire type 7 of field 5"},
      {"field 0", std::string("\x00\x01", 2), "invalid field number 0"},
      {"unknown fixed64 cut", std::string("\x29\x01\x02", 3),
       "field 5 (unknown) needs 8 bytes but 2 remain"},
  };
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.what);
    // However the bytes are split, the error is the same.
    for (size_t cut = 0; cut <= c.wire.size(); ++cut) {
      TensorChunkView view;
      absl::Status status = ParseTensorChunk(Split(c.wire, {cut}), &view);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(status.message(), HasSubstr("malformed TensorChunk"));
      EXPECT_THAT(status.message(), HasSubstr(c.message));
    }
  }
}

// Random bytes: never a crash; whenever both parsers accept, they agree.
TEST(TensorChunkCodecTest, RandomBytesAgreeWithTheGeneratedParser) {
  // The generated parser logs each name that is not UTF-8.
  google::protobuf::LogSilencer quiet;
  std::mt19937 rng(42);
  const std::string base =
      MakeChunk("abc", 16, 64, 3, Bytes(40, 9)).SerializeAsString();
  int agreed = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string wire = base;
    // A few flipped bytes, sometimes truncated.
    const int flips = 1 + rng() % 3;
    for (int f = 0; f < flips; ++f) wire[rng() % wire.size()] = rng();
    if (rng() % 4 == 0) wire.resize(rng() % wire.size());
    TensorChunkView view;
    absl::Status status =
        ParseTensorChunk(Split(wire, {wire.size() / 2}), &view);
    TensorChunk generated;
    if (status.ok() && generated.ParseFromString(wire)) {
      ExpectSame(generated, view);
      ++agreed;
    }
  }
  EXPECT_GT(agreed, 250);
}

TEST(TensorChunkCodecTest, ByteBufferRoundTripReferencesTheData) {
  std::string data = Bytes(1 << 16, 10);
  TensorChunkHeader header;
  header.name = "w/part_3";
  header.offset = 1 << 16;
  header.total_bytes = 1 << 20;
  header.version = 12;
  grpc::ByteBuffer buffer = MakeTensorChunkBuffer(
      header, grpc::Slice(data.data(), data.size(), grpc::Slice::STATIC_SLICE));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  // Not copied: the second slice is the caller's memory.
  EXPECT_EQ(reinterpret_cast<const char*>(slices[1].begin()), data.data());

  TensorChunk generated;
  grpc::Slice flat;
  ASSERT_TRUE(buffer.DumpToSingleSlice(&flat).ok());
  ASSERT_TRUE(generated.ParseFromArray(flat.begin(), flat.size()));
  EXPECT_EQ(generated.name(), "w/part_3");
  EXPECT_EQ(generated.version(), 12);
  EXPECT_EQ(generated.data(), data);

  TensorChunkParser parser;
  ASSERT_TRUE(parser.Parse(buffer).ok());
  EXPECT_EQ(parser.chunk().header.total_bytes, 1 << 20);
  EXPECT_EQ(parser.chunk().header.offset, 1 << 16);
  EXPECT_EQ(DataOf(parser.chunk()), data);
  parser.Clear();
  EXPECT_TRUE(parser.chunk().data.empty());

  // A chunk without data is the prefix alone.
  grpc::ByteBuffer empty = MakeTensorChunkBuffer(header, grpc::Slice());
  ASSERT_TRUE(empty.Dump(&slices).ok());
  EXPECT_EQ(slices.size(), 1u);
  ASSERT_TRUE(parser.Parse(empty).ok());
  EXPECT_EQ(parser.chunk().data_bytes, 0);
  EXPECT_EQ(parser.chunk().header.name, "w/part_3");
}

TEST(TensorChunkCodecTest, ParserReportsMalformedBuffers) {
  const std::string wire =
      "\x0a\x05"
      "abc";
  grpc::Slice slice(wire);
  grpc::ByteBuffer buffer(&slice, 1);
  TensorChunkParser parser;
  absl::Status status = parser.Parse(buffer);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("field 1 (name) needs 5 bytes"));
}

}  // namespace
}  // namespace tessera
