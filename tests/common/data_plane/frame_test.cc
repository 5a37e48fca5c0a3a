// The data plane's frame header and table encoding (common/data_plane/
// frame.h), the row ops included.

#include "common/data_plane/frame.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

TEST(FrameTest, HeaderRoundTripsEveryOp) {
  for (FrameOp op :
       {FrameOp::kPullDense, FrameOp::kPullDenseReply, FrameOp::kPushDense,
        FrameOp::kPushDenseReply, FrameOp::kPullRows, FrameOp::kPullRowsReply,
        FrameOp::kPushRows, FrameOp::kPushRowsReply}) {
    FrameHeader in;
    in.op = op;
    in.flags = 3;
    in.code = 5;
    in.count = 70000;
    in.a = -2;
    in.b = int64_t{1} << 40;
    in.bytes = 123456789;
    char raw[kFrameHeaderBytes];
    EncodeFrameHeader(in, raw);
    FrameHeader out;
    ASSERT_TRUE(DecodeFrameHeader(raw, &out).ok());
    EXPECT_EQ(out.op, op);
    EXPECT_EQ(out.flags, 3);
    EXPECT_EQ(out.code, 5);
    EXPECT_EQ(out.count, 70000u);
    EXPECT_EQ(out.a, -2);
    EXPECT_EQ(out.b, int64_t{1} << 40);
    EXPECT_EQ(out.bytes, 123456789);
  }
  // The row ops follow the dense ones on the wire.
  EXPECT_EQ(static_cast<int>(FrameOp::kPullRows), 5);
  EXPECT_EQ(static_cast<int>(FrameOp::kPushRowsReply), 8);
}

TEST(FrameTest, BadMagicAndNegativeSizesAreRefused) {
  FrameHeader in;
  in.op = FrameOp::kPushRows;
  char raw[kFrameHeaderBytes];
  EncodeFrameHeader(in, raw);
  raw[0] = 'X';
  FrameHeader out;
  EXPECT_EQ(DecodeFrameHeader(raw, &out).code(),
            absl::StatusCode::kInvalidArgument);
  in.bytes = -1;
  EncodeFrameHeader(in, raw);
  EXPECT_EQ(DecodeFrameHeader(raw, &out).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FrameTest, WireReaderReadsWhatWasAppendedAndStopsAtTheEnd) {
  std::string table;
  AppendString16("emb/part_1", &table);
  AppendInt64(64, &table);
  AppendInt64(-7, &table);
  WireReader reader(table);
  std::string name;
  int64_t a = 0, b = 0, c = 0;
  ASSERT_TRUE(reader.ReadString16(&name));
  ASSERT_TRUE(reader.ReadInt64(&a));
  ASSERT_TRUE(reader.ReadInt64(&b));
  EXPECT_EQ(name, "emb/part_1");
  EXPECT_EQ(a, 64);
  EXPECT_EQ(b, -7);
  EXPECT_TRUE(reader.done());
  EXPECT_FALSE(reader.ReadInt64(&c));
  EXPECT_FALSE(reader.done());

  WireReader cut(absl::string_view(table).substr(0, 5));
  EXPECT_FALSE(cut.ReadString16(&name));
  EXPECT_FALSE(cut.ReadInt64(&a));
}

}  // namespace
}  // namespace tessera
