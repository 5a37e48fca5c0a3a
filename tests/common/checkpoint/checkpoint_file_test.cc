#include "common/checkpoint/checkpoint_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/io/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/checkpoint/checkpoint_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_util::ReadWholeFile;
using testing_util::ScratchDir;
using testing_util::WriteWholeFile;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Writes a small file with a dense shard (values + two Adam slots) and a
// hash-table shard (ids, rows, one slot), as a parameter server would.
CheckpointFileSummary WriteSmallFile(const std::string& path) {
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
  const std::vector<float> m = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  const std::vector<float> v = {1, 1, 1, 1, 1, 1};
  const std::vector<int64_t> ids = {7, 1000000000000, -3};
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6};
  auto writer = CheckpointWriter::Create(path);
  EXPECT_TRUE(writer.ok()) << writer.status();
  EXPECT_TRUE((*writer)
                  ->WriteEntry(
                      "dense_0/kernel/part_1",
                      {CheckpointArrayView::Of<float>("values", values, {3, 2}),
                       CheckpointArrayView::Of<float>("slot/m", m, {3, 2}),
                       CheckpointArrayView::Of<float>("slot/v", v, {3, 2})})
                  .ok());
  EXPECT_TRUE(
      (*writer)
          ->WriteEntry(
              "emb/part_0",
              {CheckpointArrayView::Of<int64_t>("ids", ids, {3}),
               CheckpointArrayView::Of<float>("values", rows, {3, 2}),
               CheckpointArrayView::Of<float>("slot/acc", rows, {3, 2})})
          .ok());
  auto summary = (*writer)->Finish();
  EXPECT_TRUE(summary.ok()) << summary.status();
  return summary.ok() ? *summary : CheckpointFileSummary();
}

TEST(Crc32cCombine, EqualsTheCrcOfTheConcatenation) {
  std::string data(5000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  for (size_t split : {0, 1, 3, 64, 1000, 4999, 5000}) {
    const uint32_t a = crc32c::Value(data.data(), split);
    const uint32_t b = crc32c::Value(data.data() + split, data.size() - split);
    EXPECT_EQ(Crc32cCombine(a, b, data.size() - split),
              crc32c::Value(data.data(), data.size()))
        << "split " << split;
  }
}

TEST(CheckpointFile, RoundTripsEntriesArraysAndShapes) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ps-1.shards";
  const CheckpointFileSummary written = WriteSmallFile(path);
  EXPECT_EQ(written.num_entries, 2);
  EXPECT_EQ(written.size_bytes,
            static_cast<int64_t>(ReadWholeFile(path).size()));

  auto entries = ReadCheckpointFile(path);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  const CheckpointEntry& dense = (*entries)[0];
  EXPECT_EQ(dense.info.name, "dense_0/kernel/part_1");
  ASSERT_EQ(dense.info.arrays.size(), 3u);
  EXPECT_EQ(dense.info.arrays[1].key, "slot/m");
  EXPECT_EQ(dense.info.arrays[1].dtype, CheckpointDtype::kFloat32);
  EXPECT_EQ(dense.info.arrays[1].dims, (std::vector<int64_t>{3, 2}));
  std::vector<float> m(6);
  std::memcpy(m.data(), dense.data[1].data(), 24);
  EXPECT_EQ(m, (std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}));

  const CheckpointEntry& hash = (*entries)[1];
  EXPECT_EQ(hash.info.name, "emb/part_0");
  EXPECT_EQ(hash.info.FindArray("ids"), 0);
  EXPECT_EQ(hash.info.FindArray("nope"), -1);
  EXPECT_EQ(hash.info.arrays[0].dtype, CheckpointDtype::kInt64);
  std::vector<int64_t> ids(3);
  std::memcpy(ids.data(), hash.data[0].data(), 24);
  EXPECT_EQ(ids, (std::vector<int64_t>{7, 1000000000000, -3}));

  auto verified = VerifyCheckpointFile(path);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->crc32c, written.crc32c);
  EXPECT_EQ(verified->size_bytes, written.size_bytes);
  EXPECT_EQ(verified->num_entries, 2);
}

// An fp16/bf16 table's values are 2-byte arrays: written as raw bytes,
// read back with their dtype, 2 bytes per element in the file.
TEST(CheckpointFile, TwoByteFloatArraysKeepTheirDtypeAndSize) {
  ScratchDir dir;
  const std::string path = dir.path() + "/narrow";
  const std::vector<uint16_t> half = {0x3C00, 0xC000, 0x7BFF, 0x0001};
  const std::vector<uint16_t> bf = {0x3F80, 0xC000, 0x7F7F, 0x0001};
  auto as_bytes = [](const std::vector<uint16_t>& v) {
    return absl::string_view(reinterpret_cast<const char*>(v.data()),
                             v.size() * 2);
  };
  {
    auto writer = CheckpointWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE(
        (*writer)
            ->WriteEntry(
                "e",
                {{{"h", CheckpointDtype::kFloat16, {2, 2}}, as_bytes(half)},
                 {{"b", CheckpointDtype::kBFloat16, {4}}, as_bytes(bf)}})
            .ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  EXPECT_EQ(CheckpointDtypeSize(CheckpointDtype::kFloat16), 2u);
  EXPECT_EQ(CheckpointDtypeName(CheckpointDtype::kBFloat16), "bfloat16");
  auto entries = ReadCheckpointFile(path);
  ASSERT_TRUE(entries.ok()) << entries.status();
  const CheckpointEntry& e = (*entries)[0];
  EXPECT_EQ(e.info.arrays[0].dtype, CheckpointDtype::kFloat16);
  EXPECT_EQ(e.info.arrays[1].dtype, CheckpointDtype::kBFloat16);
  EXPECT_EQ(e.info.data_bytes(), 16);
  EXPECT_EQ(e.data[0], std::string(as_bytes(half)));
  EXPECT_EQ(e.data[1], std::string(as_bytes(bf)));
}

TEST(CheckpointFile, WholeFileCrcCoversEveryByteBeforeIt) {
  ScratchDir dir;
  const std::string path = dir.path() + "/f";
  const CheckpointFileSummary summary = WriteSmallFile(path);
  const std::string bytes = ReadWholeFile(path);
  // The footer is u64 count | u32 crc | 8-byte magic.
  EXPECT_EQ(summary.crc32c, crc32c::Value(bytes.data(), bytes.size() - 12));
}

TEST(CheckpointFile, StreamsLargeArraysAndSkipsUnreadOnes) {
  ScratchDir dir;
  const std::string path = dir.path() + "/big";
  // 3 MiB of values: larger than the 1 MiB buffers on both sides.
  std::vector<float> big(3 << 18);
  std::iota(big.begin(), big.end(), 0.0f);
  const std::vector<float> tail = {42.0f};
  {
    auto writer = CheckpointWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE(
        (*writer)
            ->BeginEntry("w", {{"values",
                                CheckpointDtype::kFloat32,
                                {static_cast<int64_t>(big.size())}},
                               {"tail", CheckpointDtype::kFloat32, {1}}})
            .ok());
    // Odd-sized pieces, as a server streaming rows would append them.
    const char* p = reinterpret_cast<const char*>(big.data());
    size_t left = big.size() * sizeof(float);
    for (size_t piece : {size_t{1}, size_t{4095}, size_t{2} << 20}) {
      ASSERT_TRUE((*writer)->Append(absl::string_view(p, piece)).ok());
      p += piece;
      left -= piece;
    }
    ASSERT_TRUE((*writer)->Append(absl::string_view(p, left)).ok());
    ASSERT_TRUE((*writer)
                    ->Append(absl::string_view(
                        reinterpret_cast<const char*>(tail.data()), 4))
                    .ok());
    ASSERT_TRUE((*writer)->EndEntry().ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  {
    auto reader = CheckpointReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    ASSERT_TRUE(*(*reader)->Next());
    std::vector<float> values;
    ASSERT_TRUE((*reader)->ReadArray(0, &values).ok());
    EXPECT_EQ(values, big);
    std::vector<float> got_tail;
    ASSERT_TRUE((*reader)->ReadArray(1, &got_tail).ok());
    EXPECT_EQ(got_tail, tail);
    auto more = (*reader)->Next();
    ASSERT_TRUE(more.ok()) << more.status();
    EXPECT_FALSE(*more);
  }
  {
    // Reading only the last array consumes the first one unseen.
    auto reader = CheckpointReader::Open(path);
    ASSERT_TRUE(reader.ok());
    ASSERT_TRUE(*(*reader)->Next());
    std::vector<float> got_tail;
    ASSERT_TRUE((*reader)->ReadArray(1, &got_tail).ok());
    EXPECT_EQ(got_tail, tail);
    std::vector<float> values;
    absl::Status again = (*reader)->ReadArray(0, &values);
    EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(again.message()),
                HasSubstr("already read or skipped"));
    EXPECT_FALSE(*(*reader)->Next());
  }
}

TEST(CheckpointFile, ReaderReportsMisuse) {
  ScratchDir dir;
  const std::string path = dir.path() + "/f";
  WriteSmallFile(path);
  auto reader = CheckpointReader::Open(path);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(*(*reader)->Next());
  std::vector<int64_t> wrong_type;
  absl::Status s = (*reader)->ReadArray(0, &wrong_type);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("'values' is float32, not int64"));
  std::vector<float> values;
  EXPECT_EQ((*reader)->ReadArray(3, &values).code(),
            absl::StatusCode::kFailedPrecondition);
  std::string small(5, '\0');
  EXPECT_EQ((*reader)->ReadArray(0, absl::Span<char>(small.data(), 5)).code(),
            absl::StatusCode::kFailedPrecondition);
  // Misuse does not poison the reader.
  EXPECT_TRUE((*reader)->ReadArray(0, &values).ok());
  EXPECT_TRUE(*(*reader)->Next());
  EXPECT_FALSE(*(*reader)->Next());
}

TEST(CheckpointFile, WriterWritesUnderATemporaryNameUntilFinish) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ps-0.shards";
  const std::string tmp = absl::StrCat(path, ".tmp-", getpid());
  auto writer = CheckpointWriter::Create(path);
  ASSERT_TRUE(writer.ok());
  const std::vector<float> x = {1};
  ASSERT_TRUE(
      (*writer)
          ->WriteEntry("x", {CheckpointArrayView::Of<float>("values", x, {1})})
          .ok());
  EXPECT_TRUE(Exists(tmp));
  EXPECT_FALSE(Exists(path));
  ASSERT_TRUE((*writer)->Finish().ok());
  EXPECT_FALSE(Exists(tmp));
  EXPECT_TRUE(Exists(path));
}

TEST(CheckpointFile, AbandonedWriterLeavesNothing) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ps-0.shards";
  {
    auto writer = CheckpointWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->BeginEntry("x", {}).ok());
  }
  EXPECT_FALSE(Exists(path));
  EXPECT_FALSE(Exists(absl::StrCat(path, ".tmp-", getpid())));
}

TEST(CheckpointFile, WriterRejectsBadEntriesAndMisuse) {
  ScratchDir dir;
  auto writer = CheckpointWriter::Create(dir.path() + "/f");
  ASSERT_TRUE(writer.ok());
  CheckpointWriter& w = **writer;
  EXPECT_EQ(w.BeginEntry("", {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      w.BeginEntry(std::string(kMaxCheckpointNameBytes + 1, 'n'), {}).code(),
      absl::StatusCode::kInvalidArgument);
  absl::Status repeated =
      w.BeginEntry("e", {{"a", CheckpointDtype::kFloat32, {1}},
                         {"a", CheckpointDtype::kFloat32, {1}}});
  EXPECT_EQ(repeated.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(repeated.message()), HasSubstr("array 'a' repeats"));
  EXPECT_EQ(w.BeginEntry("e", {{"a", CheckpointDtype::kFloat32, {-1}}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w.BeginEntry("e", {{"a",
                                CheckpointDtype::kInt64,
                                {int64_t{1} << 40, int64_t{1} << 40}}})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w.Append("x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.EndEntry().code(), absl::StatusCode::kFailedPrecondition);

  // A size mismatch is caught before anything is written.
  const std::vector<float> three = {1, 2, 3};
  absl::Status mismatch =
      w.WriteEntry("e", {CheckpointArrayView::Of<float>("values", three, {2})});
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mismatch.message()),
              HasSubstr("has 12 bytes; its shape needs 8"));

  ASSERT_TRUE(w.BeginEntry("e", {{"a", CheckpointDtype::kInt32, {2}}}).ok());
  EXPECT_EQ(w.BeginEntry("f", {}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.Append(std::string(12, 'x')).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(w.Append(std::string(4, 'x')).ok());
  EXPECT_EQ(w.EndEntry().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.Finish().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(w.Append(std::string(4, 'y')).ok());
  ASSERT_TRUE(w.EndEntry().ok());
  auto summary = w.Finish();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->num_entries, 1);
  EXPECT_TRUE(VerifyCheckpointFile(dir.path() + "/f").ok());
}

TEST(CheckpointFile, MissingFileIsNotFound) {
  ScratchDir dir;
  auto reader = CheckpointReader::Open(dir.path() + "/ckpt-0000000001/nope");
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(reader.status().message()),
              StartsWith("checkpoint ckpt-0000000001/nope: "));
}

TEST(CheckpointFile, TruncationAtEveryOffsetIsANamedError) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ps-1.shards";
  WriteSmallFile(path);
  const std::string bytes = ReadWholeFile(path);
  ASSERT_GT(bytes.size(), 100u);
  const std::string cut = dir.path() + "/cut.shards";
  const std::string label =
      absl::StrCat("checkpoint ", dir.path().substr(dir.path().rfind('/') + 1),
                   "/cut.shards: ");
  for (size_t len = 0; len < bytes.size(); ++len) {
    WriteWholeFile(cut, bytes.substr(0, len));
    auto entries = ReadCheckpointFile(cut);
    ASSERT_FALSE(entries.ok()) << "length " << len;
    EXPECT_EQ(entries.status().code(), absl::StatusCode::kDataLoss)
        << "length " << len << ": " << entries.status();
    EXPECT_THAT(std::string(entries.status().message()), StartsWith(label));
    EXPECT_THAT(std::string(entries.status().message()), HasSubstr("truncated"))
        << "length " << len;
  }
}

TEST(CheckpointFile, EveryFlippedBitIsDetected) {
  ScratchDir dir;
  const std::string path = dir.path() + "/ps-1.shards";
  WriteSmallFile(path);
  const std::string bytes = ReadWholeFile(path);
  const std::string bad = dir.path() + "/bad.shards";
  for (size_t i = 0; i < bytes.size(); ++i) {
    {
      const int bit = static_cast<int>(i % 8);
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      WriteWholeFile(bad, flipped);
      auto verified = VerifyCheckpointFile(bad);
      ASSERT_FALSE(verified.ok()) << "byte " << i << " bit " << bit;
      EXPECT_EQ(verified.status().code(), absl::StatusCode::kDataLoss)
          << "byte " << i << ": " << verified.status();
    }
  }
}

TEST(CheckpointFile, CorruptDataNamesFileAndEntry) {
  ScratchDir dir;
  const std::string ckpt = dir.path() + "/ckpt-0000000120";
  ASSERT_EQ(mkdir(ckpt.c_str(), 0755), 0);
  const std::string path = ckpt + "/ps-1.shards";
  WriteSmallFile(path);
  std::string bytes = ReadWholeFile(path);
  // The first value of the first entry, 1.5f, sits right before its
  // neighbours; find its bytes and flip one.
  const float first = 1.5f;
  const size_t at = bytes.find(
      std::string(reinterpret_cast<const char*>(&first), sizeof(first)));
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 1;
  WriteWholeFile(path, bytes);
  auto entries = ReadCheckpointFile(path);
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(entries.status().message(),
            "checkpoint ckpt-0000000120/ps-1.shards: entry "
            "'dense_0/kernel/part_1' data CRC mismatch (entry at offset 16)");
}

// Builds files byte by byte to reach checks a writer never trips.
class RawFile {
 public:
  explicit RawFile(uint32_t version = kCheckpointFormatVersion) {
    bytes_ = "TSRACKPT";
    Put32(version);
    Put32(crc32c::Mask(crc32c::Value(bytes_.data(), 12)));
  }
  // An entry whose metadata is `meta` (CRC correct) and `data` follows.
  void AddEntry(const std::string& meta, const std::string& data,
                uint32_t meta_len_override = 0) {
    std::string head;
    const uint32_t len = meta_len_override ? meta_len_override
                                           : static_cast<uint32_t>(meta.size());
    head.append(reinterpret_cast<const char*>(&len), 4);
    head += meta;
    bytes_ += head;
    Put32(crc32c::Mask(crc32c::Value(head.data(), head.size())));
    bytes_ += data;
    Put32(crc32c::Mask(crc32c::Value(data.data(), data.size())));
    ++entries_;
  }
  std::string Finish() {
    const uint64_t n = entries_;
    bytes_.append(reinterpret_cast<const char*>(&n), 8);
    Put32(crc32c::Mask(crc32c::Value(bytes_.data(), bytes_.size())));
    return bytes_ + "TSRAEND!";
  }

  static std::string Meta(const std::string& name, const std::string& key,
                          uint8_t dtype, std::vector<int64_t> dims) {
    std::string meta;
    Put16(static_cast<uint16_t>(name.size()), &meta);
    meta += name;
    Put16(1, &meta);
    Put16(static_cast<uint16_t>(key.size()), &meta);
    meta += key;
    meta.push_back(static_cast<char>(dtype));
    meta.push_back(static_cast<char>(dims.size()));
    for (int64_t d : dims) meta.append(reinterpret_cast<const char*>(&d), 8);
    return meta;
  }

 private:
  void Put32(uint32_t v) {
    bytes_.append(reinterpret_cast<const char*>(&v), 4);
  }
  static void Put16(uint16_t v, std::string* out) {
    out->append(reinterpret_cast<const char*>(&v), 2);
  }

  std::string bytes_;
  uint64_t entries_ = 0;
};

TEST(CheckpointFile, RawBuilderMatchesTheWriter) {
  ScratchDir dir;
  RawFile raw;
  const float one = 1.0f;
  raw.AddEntry(RawFile::Meta("x", "values", 1, {1}),
               std::string(reinterpret_cast<const char*>(&one), 4));
  WriteWholeFile(dir.path() + "/raw", raw.Finish());
  auto entries = ReadCheckpointFile(dir.path() + "/raw");
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ((*entries)[0].info.name, "x");
}

TEST(CheckpointFile, HugeDeclaredSizesAreRejectedWithoutAllocating) {
  ScratchDir dir;
  const std::string path = dir.path() + "/huge";
  {
    RawFile raw;
    raw.AddEntry(RawFile::Meta("x", "values", 1, {int64_t{1} << 40}), "");
    WriteWholeFile(path, raw.Finish());
    auto r = ReadCheckpointFile(path);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("'x' declares 4398046511104 data bytes but only"));
  }
  {
    RawFile raw;
    raw.AddEntry(RawFile::Meta("x", "values", 1, {1}), "abcd", 0xFFFFFFF0u);
    WriteWholeFile(path, raw.Finish());
    auto r = ReadCheckpointFile(path);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("entry #0 at offset 16: header length 4294967280 "
                          "exceeds"));
  }
  {
    RawFile raw;
    raw.AddEntry(RawFile::Meta("x", "values", 9, {1}), "abcd");
    WriteWholeFile(path, raw.Finish());
    auto r = ReadCheckpointFile(path);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("unknown dtype code 9"));
  }
  {
    RawFile raw;
    raw.AddEntry(RawFile::Meta("x", "values", 1, {2, -1}), "");
    WriteWholeFile(path, raw.Finish());
    auto r = ReadCheckpointFile(path);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("negative dimension -1"));
  }
}

TEST(CheckpointFile, NewerFormatVersionIsUnimplemented) {
  ScratchDir dir;
  RawFile raw(/*version=*/2);
  WriteWholeFile(dir.path() + "/v2", raw.Finish());
  auto r = ReadCheckpointFile(dir.path() + "/v2");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("format version 2"));
}

TEST(CheckpointFile, NotACheckpointIsNamed) {
  ScratchDir dir;
  WriteWholeFile(dir.path() + "/text", "hello, this is not a checkpoint file");
  auto r = ReadCheckpointFile(dir.path() + "/text");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("not a checkpoint file"));
}

}  // namespace
}  // namespace tessera
