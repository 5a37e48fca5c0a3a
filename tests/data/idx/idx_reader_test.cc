#include "data/idx/idx_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/idx/idx_test_files.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using idx_test::Bytes;
using idx_test::IdxBytes;
using idx_test::Ubyte;

class IdxReaderTest : public idx_test::IdxFileTest {};

// Pseudo-random bytes, so gzip cannot shrink them to almost nothing and a
// truncated .gz really loses data.
Bytes Noise(size_t n) {
  Bytes out(n);
  uint32_t x = 12345;
  for (uint8_t& b : out) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 16);
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

TEST_F(IdxReaderTest, ReadsPlainAndGzipped) {
  const Bytes data = Noise(5 * 2 * 3);
  const Bytes file = Ubyte({5, 2, 3}, data);
  for (const std::string& path :
       {WritePlain("a.idx", file), WriteGz("a.idx.gz", file)}) {
    absl::StatusOr<IdxArray> a = ReadIdx(path);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_THAT(a->dims, ElementsAre(5, 2, 3));
    EXPECT_EQ(a->data, data);
  }
}

TEST_F(IdxReaderTest, ReadsOneDimensional) {
  absl::StatusOr<IdxArray> a =
      ReadIdx(WriteGz("l.gz", Ubyte({4}, {3, 1, 4, 1})));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->dims, ElementsAre(4));
  EXPECT_THAT(a->data, ElementsAre(3, 1, 4, 1));
}

TEST_F(IdxReaderTest, SlicesItems) {
  const Bytes data = Noise(5 * 6);
  const Bytes file = Ubyte({5, 2, 3}, data);
  for (const std::string& path :
       {WritePlain("a.idx", file), WriteGz("a.idx.gz", file)}) {
    absl::StatusOr<IdxArray> a = ReadIdx(path, 2, 2);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_THAT(a->dims, ElementsAre(2, 2, 3));
    EXPECT_EQ(a->data, Bytes(data.begin() + 12, data.begin() + 24));

    a = ReadIdx(path, 3);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_THAT(a->dims, ElementsAre(2, 2, 3));
    EXPECT_EQ(a->data, Bytes(data.begin() + 18, data.end()));

    for (auto [first, count] : {std::pair<int64_t, int64_t>{5, -1}, {0, 0}}) {
      a = ReadIdx(path, first, count);
      ASSERT_TRUE(a.ok()) << a.status();
      EXPECT_THAT(a->dims, ElementsAre(0, 2, 3));
      EXPECT_TRUE(a->data.empty());
    }
  }
}

TEST_F(IdxReaderTest, SlicesDeepIntoLargeGzipFile) {
  // Larger than zlib's and the reader's buffers, so the skip streams.
  const Bytes data = Noise(3000 * 1000);
  const std::string path = WriteGz("big.gz", Ubyte({3000, 1000}, data));
  absl::StatusOr<IdxArray> a = ReadIdx(path, 2990, 10);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->dims, ElementsAre(10, 1000));
  EXPECT_EQ(a->data, Bytes(data.end() - 10000, data.end()));
}

TEST_F(IdxReaderTest, ZeroSizedDimsAreFine) {
  absl::StatusOr<IdxArray> a =
      ReadIdx(WritePlain("e0", Ubyte({0, 28, 28}, {})));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->dims, ElementsAre(0, 28, 28));
  EXPECT_TRUE(a->data.empty());

  a = ReadIdx(WriteGz("e1.gz", Ubyte({3, 0}, {})), 1, 2);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->dims, ElementsAre(2, 0));
  EXPECT_TRUE(a->data.empty());
}

TEST_F(IdxReaderTest, SliceOutOfRange) {
  const std::string path = WriteGz("a.gz", Ubyte({5, 2}, Noise(10)));
  for (auto [first, count] :
       {std::pair<int64_t, int64_t>{4, 2}, {6, -1}, {-1, 1}, {0, -2}, {0, 6}}) {
    absl::StatusOr<IdxArray> a = ReadIdx(path, first, count);
    ASSERT_EQ(a.status().code(), absl::StatusCode::kOutOfRange)
        << first << " " << count << " " << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr(path));
    EXPECT_THAT(a.status().message(),
                HasSubstr(absl::StrCat("first_item=", first)));
    EXPECT_THAT(a.status().message(),
                HasSubstr(absl::StrCat("num_items=", count)));
    EXPECT_THAT(a.status().message(), HasSubstr("5 items"));
  }
}

TEST_F(IdxReaderTest, MissingFileIsNotFound) {
  const std::string path = absl::StrCat(dir_, "/no-such-file.gz");
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound) << a.status();
  EXPECT_THAT(a.status().message(), HasSubstr(path));
  EXPECT_EQ(ReadIdxDims(path).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(IdxReaderTest, BadMagic) {
  Bytes file = Ubyte({2}, {1, 2});
  file[1] = 0x01;
  for (const std::string& path :
       {WritePlain("m", file), WriteGz("m.gz", file)}) {
    absl::StatusOr<IdxArray> a = ReadIdx(path);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(a.status().message(), HasSubstr(path));
    EXPECT_THAT(a.status().message(), HasSubstr("bad magic"));
  }
}

TEST_F(IdxReaderTest, BadDimensionCount) {
  for (uint8_t ndims : {0, 5}) {
    const std::string path =
        WritePlain("d", {0, 0, 0x08, ndims, 0, 0, 0, 1, 0, 0, 0, 1, 0,
                         0, 0, 1,    0,     0, 0, 1, 0, 0, 0, 1, 7});
    absl::StatusOr<IdxArray> a = ReadIdx(path);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(a.status().message(), HasSubstr(path));
    EXPECT_THAT(
        a.status().message(),
        HasSubstr(absl::StrCat(static_cast<int>(ndims), " dimensions")));
  }
}

TEST_F(IdxReaderTest, UnsupportedTypeIsUnimplemented) {
  const std::string path = WriteGz("f.gz", IdxBytes(0x0D, {1}, {0, 0, 0, 0}));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(a.status().message(), HasSubstr(path));
  EXPECT_THAT(a.status().message(), HasSubstr("0x0d"));
}

TEST_F(IdxReaderTest, TruncatedHeader) {
  // Declares 3 dims but holds only one; then an empty file and a partial
  // magic number.
  for (const Bytes& file :
       {Bytes{0, 0, 0x08, 3, 0, 0, 0, 9}, Bytes{}, Bytes{0, 0}}) {
    for (const std::string& path :
         {WritePlain("h", file), WriteGz("h.gz", file)}) {
      absl::StatusOr<IdxArray> a = ReadIdx(path);
      EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << a.status();
      EXPECT_THAT(a.status().message(), HasSubstr(path));
      EXPECT_THAT(a.status().message(), HasSubstr("truncated header"));
    }
  }
}

TEST_F(IdxReaderTest, TruncatedData) {
  // Declares 10 items of 4 bytes but holds 30 bytes.
  const Bytes file = Ubyte({10, 4}, Noise(30));
  for (const std::string& path :
       {WritePlain("t", file), WriteGz("t.gz", file)}) {
    absl::StatusOr<IdxArray> a = ReadIdx(path);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(a.status().message(),
              absl::StrCat(path,
                           ": truncated: expected 40 bytes of data for "
                           "10 items, got 30"));

    a = ReadIdx(path, 8, 2);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(a.status().message(),
              absl::StrCat(path,
                           ": truncated: expected 8 bytes of data for "
                           "2 items, got 0"));

    // Slices that lie within the data present are still readable.
    a = ReadIdx(path, 0, 7);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->data.size(), 28u);
  }
}

TEST_F(IdxReaderTest, TruncatedGzipStream) {
  const std::string path = WriteGz("s.gz", Ubyte({2000, 16}, Noise(32000)));
  const std::string gz = ReadFile(path);
  ASSERT_GT(gz.size(), 1000u);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(gz.data(), gz.size() / 2);

  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << a.status();
  EXPECT_THAT(a.status().message(),
              HasSubstr(absl::StrCat(path,
                                     ": truncated: expected 32000 bytes "
                                     "of data for 2000 items, got ")));

  a = ReadIdx(path, 1990);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << a.status();
  EXPECT_THAT(a.status().message(),
              HasSubstr("expected 160 bytes of data for 10 items, got 0"));
}

TEST_F(IdxReaderTest, CorruptGzipChecksum) {
  const std::string path = WriteGz("c.gz", Ubyte({100, 10}, Noise(1000)));
  std::string gz = ReadFile(path);
  // The gzip trailer is CRC-32 then length, 4 bytes each.
  gz[gz.size() - 8] ^= 0xff;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(gz.data(), gz.size());

  // Reads that reach the last item must see the checksum, even when most of
  // the data was skipped.
  for (int64_t first : {0, 90}) {
    absl::StatusOr<IdxArray> a = ReadIdx(path, first);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr(path));
  }
}

TEST_F(IdxReaderTest, IgnoresBytesAfterData) {
  Bytes file = Ubyte({2, 2}, {1, 2, 3, 4});
  file.push_back(99);
  for (const std::string& path :
       {WritePlain("x", file), WriteGz("x.gz", file)}) {
    absl::StatusOr<IdxArray> a = ReadIdx(path);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_THAT(a->data, ElementsAre(1, 2, 3, 4));
  }
}

// A header that declares more items than the file holds (0xFFFFFFFF in a
// user's report, which made a plan of 4 billion examples) is refused when
// counting, naming both sizes; an honest file counts its items.
TEST_F(IdxReaderTest, CountIdxItemsRefusesALyingHeader) {
  const Bytes honest = Ubyte({10, 4}, Noise(40));
  const Bytes lying = Ubyte({0xFFFFFFFFu, 4}, Noise(40));
  for (bool gz : {false, true}) {
    const std::string a =
        gz ? WriteGz("a.gz", honest) : WritePlain("a", honest);
    absl::StatusOr<int64_t> n = CountIdxItems(a);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, 10);
    const std::string b = gz ? WriteGz("b.gz", lying) : WritePlain("b", lying);
    n = CountIdxItems(b);
    EXPECT_EQ(n.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(n.status().message()),
                HasSubstr("declares 4294967295 items (17179869180 bytes of "
                          "data), the file holds 40 bytes"));
  }
}

TEST_F(IdxReaderTest, ReadIdxDimsReadsOnlyTheHeader) {
  // The data is truncated, but the header alone is intact.
  absl::StatusOr<std::vector<int64_t>> dims =
      ReadIdxDims(WriteGz("h.gz", Ubyte({7, 3, 2}, {1, 2})));
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_THAT(*dims, ElementsAre(7, 3, 2));
}

}  // namespace
}  // namespace tessera
