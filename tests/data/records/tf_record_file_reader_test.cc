#include "data/records/tf_record_file_reader.h"

#include <zlib.h>

#include <string>
#include <vector>

#include "data/records/record_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/stream/stream_test_files.h"

namespace tessera {
namespace {

using stream_test::StreamFileTest;
using ::testing::HasSubstr;

class TfRecordFileReaderTest : public StreamFileTest {
 protected:
  // A plain TFRecord file of `records` through zlib's compress2, which is
  // what TensorFlow's compression_type="ZLIB" writes (one zlib stream,
  // window 15, header 78 9c at the default level).
  std::string WriteZlib(const std::string& name,
                        const std::vector<std::string>& records,
                        int level = Z_DEFAULT_COMPRESSION) {
    const std::string plain = ReadBytes(WriteRecords(name + ".plain", records));
    return WriteText(name, Compress(plain, level));
  }

  static std::string Compress(const std::string& bytes, int level) {
    std::string out(compressBound(bytes.size()), '\0');
    uLongf n = out.size();
    EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(out.data()), &n,
                        reinterpret_cast<const Bytef*>(bytes.data()),
                        bytes.size(), level),
              Z_OK);
    out.resize(n);
    return out;
  }

  std::vector<std::string> ReadAll(const std::string& path,
                                   absl::Status* status) {
    std::vector<std::string> out;
    auto reader = TfRecordFileReader::Open(path);
    if (!reader.ok()) {
      *status = reader.status();
      return out;
    }
    absl::string_view record;
    while (true) {
      absl::StatusOr<bool> more = (*reader)->Next(&record);
      if (!more.ok()) {
        *status = more.status();
        return out;
      }
      if (!*more) break;
      out.emplace_back(record);
    }
    *status = absl::OkStatus();
    return out;
  }
};

TEST_F(TfRecordFileReaderTest, ReadsPlainAndGzipAlike) {
  const std::vector<std::string> records = {"a", "", std::string(3000000, 'z'),
                                            "last"};
  for (bool gzip : {false, true}) {
    const std::string path = WriteRecords(gzip ? "g" : "p", records, gzip);
    absl::Status status;
    EXPECT_EQ(ReadAll(path, &status), records);
    EXPECT_TRUE(status.ok()) << status;
    auto reader = TfRecordFileReader::Open(path);
    absl::string_view r;
    ASSERT_TRUE((*reader)->Next(&r).ok());
    EXPECT_EQ((*reader)->compression(),
              gzip ? TfRecordFileReader::Compression::kGzip
                   : TfRecordFileReader::Compression::kNone);
  }
}

// The name says nothing: a gzip file without .gz and a plain file with it.
TEST_F(TfRecordFileReaderTest, DetectsCompressionFromTheBytes) {
  const std::string gz = WriteRecords("data.tfrecord", {"x", "y"}, true);
  const std::string plain = WriteRecords("data.tfrecord.gz", {"x", "y"});
  EXPECT_EQ(static_cast<unsigned char>(ReadBytes(gz)[0]), 0x1f);
  for (const std::string& path : {gz, plain}) {
    absl::Status status;
    EXPECT_EQ(ReadAll(path, &status), (std::vector<std::string>{"x", "y"}));
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST_F(TfRecordFileReaderTest, DataCrcMismatchNamesTheRecordAndReadingGoesOn) {
  const std::string path = WriteRecords("f", {"first", "second", "third"});
  std::string bytes = ReadBytes(path);
  // Record 1's data starts after record 0 (12 + 5 + 4 bytes) and a header.
  bytes[21 + 12] ^= 1;
  WriteText("f", bytes);
  auto reader = TfRecordFileReader::Open(path);
  absl::string_view r;
  ASSERT_TRUE((*reader)->Next(&r).ok());
  absl::StatusOr<bool> bad = (*reader)->Next(&r);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr(path + ": record 1"));
  EXPECT_THAT(bad.status().message(), HasSubstr("data CRC"));
  ASSERT_TRUE((*reader)->Next(&r).ok());
  EXPECT_EQ(r, "third");
}

TEST_F(TfRecordFileReaderTest, LengthCrcMismatchIsFinal) {
  const std::string path = WriteRecords("f", {"first", "second"});
  std::string bytes = ReadBytes(path);
  bytes[21] ^= 1;  // record 1's length
  WriteText("f", bytes);
  absl::Status status;
  EXPECT_EQ(ReadAll(path, &status).size(), 1u);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("record 1"));
  EXPECT_THAT(status.message(), HasSubstr("length CRC"));
}

TEST_F(TfRecordFileReaderTest, TruncatedRecordsPlainAndGzip) {
  const std::string whole = ReadBytes(WriteRecords("w", {"first", "second"}));
  for (size_t cut : {size_t{25}, whole.size() - 1}) {
    const std::string plain = WriteText("p", whole.substr(0, cut));
    absl::Status status;
    EXPECT_EQ(ReadAll(plain, &status).size(), 1u);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(status.message(), HasSubstr("record 1"));
    EXPECT_THAT(status.message(), HasSubstr("truncated"));
    // A complete gzip stream of the cut records.
    const std::string path = Path("g");
    gzFile g = gzopen(path.c_str(), "wb");
    gzwrite(g, whole.data(), cut);
    gzclose(g);
    EXPECT_EQ(ReadAll(path, &status).size(), 1u);
    EXPECT_THAT(status.message(), HasSubstr("truncated"));
  }
  // A gzip stream cut short.
  const std::string gz =
      ReadBytes(WriteRecords("z", {"first", "second"}, true));
  const std::string cut = WriteText("cut", gz.substr(0, gz.size() - 6));
  absl::Status status;
  ReadAll(cut, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("truncated gzip stream"));
}

TEST_F(TfRecordFileReaderTest, SkipPassesRecordsOfAnySize) {
  std::vector<std::string> records;
  for (int i = 0; i < 20; ++i) {
    records.push_back(std::string(i % 5 == 0 ? 1500000 : 10, 'a' + i));
  }
  for (bool gzip : {false, true}) {
    const std::string path = WriteRecords("f", records, gzip);
    auto reader = TfRecordFileReader::Open(path);
    absl::string_view r;
    EXPECT_EQ(*(*reader)->Skip(5), 5);
    ASSERT_TRUE(*(*reader)->Next(&r));
    EXPECT_EQ(r, records[5]);
    EXPECT_EQ(*(*reader)->Skip(9), 9);
    EXPECT_EQ((*reader)->index(), 15);
    ASSERT_TRUE(*(*reader)->Next(&r));
    EXPECT_EQ(r, records[15]);
    EXPECT_EQ(*(*reader)->Skip(100), 4);
    EXPECT_EQ(*CountRecords("tfrecord", path, CsvOptions()), 20);
  }
}

TEST_F(TfRecordFileReaderTest, CountFindsATruncatedPlainFile) {
  const std::string whole =
      ReadBytes(WriteRecords("w", {"first", std::string(3000000, 's')}));
  const std::string path = WriteText("p", whole.substr(0, whole.size() - 10));
  absl::StatusOr<int64_t> n = CountRecords("tfrecord", path, CsvOptions());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(n.status().message(), HasSubstr("record 1"));
}

TEST_F(TfRecordFileReaderTest, ReadsZlibAsTensorFlowWritesIt) {
  std::vector<std::string> records = {"a", "", std::string(3000000, 'z')};
  for (int i = 0; i < 50; ++i)
    records.push_back(std::string(i * 37, 'a' + i % 26));
  for (int level : {Z_DEFAULT_COMPRESSION, 1, 9}) {
    const std::string path = WriteZlib("data.tfrecord.gz", records, level);
    const std::string bytes = ReadBytes(path);
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x78);
    absl::Status status;
    EXPECT_EQ(ReadAll(path, &status), records);
    EXPECT_TRUE(status.ok()) << status;
    auto reader = TfRecordFileReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->compression(), TfRecordFileReader::Compression::kZlib);
    absl::string_view r;
    EXPECT_EQ(*(*reader)->Skip(2), 2);
    ASSERT_TRUE(*(*reader)->Next(&r));
    EXPECT_EQ(r, records[2]);
    EXPECT_EQ(*CountRecords("tfrecord", path, CsvOptions()),
              static_cast<int64_t>(records.size()));
  }
  // An empty data set compressed is a complete stream of no records.
  absl::Status status;
  EXPECT_TRUE(ReadAll(WriteText("empty", Compress("", 6)), &status).empty());
  EXPECT_TRUE(status.ok()) << status;
}

// A plain file whose first record is 376 (0x178) bytes long starts with
// 78 01, a valid zlib header; its TFRecord header's CRC says it is plain.
TEST_F(TfRecordFileReaderTest, PlainFileThatStartsLikeZlibIsPlain) {
  const std::vector<std::string> records = {std::string(376, 'q'), "next"};
  const std::string path = WriteRecords("p", records);
  const std::string bytes = ReadBytes(path);
  ASSERT_EQ(static_cast<unsigned char>(bytes[0]), 0x78);
  ASSERT_EQ(static_cast<unsigned char>(bytes[1]), 0x01);
  const unsigned char head[2] = {0x78, 0x01};
  ASSERT_TRUE(LooksLikeZlibHeader(head));
  absl::Status status;
  EXPECT_EQ(ReadAll(path, &status), records);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ((*TfRecordFileReader::Open(path))->compression(),
            TfRecordFileReader::Compression::kNone);
}

TEST_F(TfRecordFileReaderTest, BrokenZlibStreamsNameTheFileAndRecord) {
  std::vector<std::string> records;
  for (int i = 0; i < 200; ++i)
    records.push_back(std::string(1000, 'a' + i % 26));
  const std::string whole = ReadBytes(WriteZlib("z", records));
  // Cut short: the records before the cut are read, then DataLoss.
  const std::string cut = WriteText("cut", whole.substr(0, whole.size() / 2));
  absl::Status status;
  ReadAll(cut, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(cut + ": record "));
  EXPECT_THAT(status.message(), HasSubstr("truncated zlib stream"));
  // Without its 4-byte Adler-32 trailer, every record is there but the
  // stream is not complete.
  const std::string no_trailer =
      WriteText("trailer", whole.substr(0, whole.size() - 4));
  EXPECT_EQ(ReadAll(no_trailer, &status).size(), records.size());
  EXPECT_THAT(status.message(), HasSubstr("truncated zlib stream"));
  // A flipped byte inside the deflate data.
  std::string flipped = whole;
  flipped[whole.size() / 3] ^= 0x55;
  ReadAll(WriteText("flipped", flipped), &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("flipped: record "));
  // Bytes after the stream that are not another zlib stream.
  ReadAll(WriteText("trailing", whole + "garbage!"), &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("corrupt zlib stream"));
  // Two streams one after the other read as one file (as gzip members).
  const std::string two =
      WriteText("two", whole + ReadBytes(WriteZlib("z2", {"extra"})));
  std::vector<std::string> both = records;
  both.push_back("extra");
  EXPECT_EQ(ReadAll(two, &status), both);
  EXPECT_TRUE(status.ok()) << status;
}

TEST_F(TfRecordFileReaderTest, MissingFileIsNotFound) {
  EXPECT_EQ(TfRecordFileReader::Open(Path("nope")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(TfRecordFileReaderTest, NotATfRecordFile) {
  const std::string path = WriteText("t", "label,x\n1,2\n3,4\n");
  absl::Status status;
  ReadAll(path, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("record 0"));
}

}  // namespace
}  // namespace tessera
