#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/io/tf_record.h"
#include "common/tensorboard/event_file_reader.h"
#include "common/tensorboard/event_file_writer.h"
#include "common/tensorboard/summary_histogram.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// A fresh folder under the test temp dir, removed afterwards.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = ::testing::TempDir() + "/event_file_test_XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempFolder() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
}

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

TEST(TfRecordTest, FramesAKnownRecordByteForByte) {
  // Computed independently (a bitwise CRC-32C in Python): length 9 as
  // uint64 LE, masked crc32c of those 8 bytes (0x3971f937), the data, and
  // the masked crc32c of "123456789" (crc 0xe3069283, masked 0xc78ab0e5).
  std::string out;
  AppendTfRecord("123456789", &out);
  EXPECT_EQ(Hex(out),
            "0900000000000000"
            "37f97139"
            "313233343536373839"
            "e5b08ac7");
  // The empty record: masked crc of nothing is the mask delta itself.
  std::string empty;
  AppendTfRecord("", &empty);
  EXPECT_EQ(Hex(empty), "000000000000000029039807d8ea82a2");
}

TEST(TfRecordTest, ReadsBackWhatWasFramed) {
  TempFolder dir;
  const std::string path = dir.path() + "/records";
  std::string bytes;
  const std::vector<std::string> records = {
      "first", "", std::string(70000, 'x'), std::string("\0\1\2", 3)};
  for (const std::string& r : records) AppendTfRecord(r, &bytes);
  Spit(path, bytes);

  auto reader = TfRecordReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string record;
  for (const std::string& want : records) {
    ASSERT_TRUE((*reader)->Next(&record).ok());
    EXPECT_EQ(record, want);
  }
  EXPECT_TRUE(absl::IsOutOfRange((*reader)->Next(&record)));
  EXPECT_EQ((*reader)->offset(), static_cast<int64_t>(bytes.size()));
}

TEST(TfRecordTest, MissingFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(
      TfRecordReader::Open(::testing::TempDir() + "/no_such_records")
          .status()));
}

// Reads every record of `bytes`; returns the first error.
absl::Status ReadAll(const std::string& bytes, int* good_records) {
  TempFolder dir;
  const std::string path = dir.path() + "/records";
  Spit(path, bytes);
  auto reader = TfRecordReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::string record;
  *good_records = 0;
  while (true) {
    absl::Status s = (*reader)->Next(&record);
    if (absl::IsOutOfRange(s)) return absl::OkStatus();
    if (!s.ok()) return s;
    ++*good_records;
  }
}

TEST(TfRecordTest, EveryFlippedByteIsDetected) {
  std::string bytes;
  AppendTfRecord("hello tensorboard", &bytes);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x20;
    int good = 0;
    absl::Status s = ReadAll(bad, &good);
    EXPECT_TRUE(absl::IsDataLoss(s)) << "byte " << i << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("record at byte 0")) << i;
    EXPECT_EQ(good, 0);
  }
}

TEST(TfRecordTest, EveryTruncationIsDetected) {
  std::string first, bytes;
  AppendTfRecord("one", &first);
  bytes = first;
  AppendTfRecord("the second record", &bytes);
  // Cutting inside the second record keeps the first readable and reports
  // the second as lost; cutting exactly between records is a clean end.
  for (size_t cut = first.size() + 1; cut < bytes.size(); ++cut) {
    int good = 0;
    absl::Status s = ReadAll(bytes.substr(0, cut), &good);
    EXPECT_TRUE(absl::IsDataLoss(s)) << "cut at " << cut << ": " << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("record at byte " + std::to_string(first.size())))
        << cut;
    EXPECT_EQ(good, 1) << cut;
  }
  int good = 0;
  EXPECT_TRUE(ReadAll(bytes.substr(0, first.size()), &good).ok());
  EXPECT_EQ(good, 1);
}

TEST(TfRecordTest, LengthBeyondTheFileIsDataLossNotAHugeAllocation) {
  // A record whose length field (with a matching CRC) claims far more bytes
  // than the file has.
  std::string bytes;
  AppendTfRecord(std::string(10, 'a'), &bytes);
  std::string lie;
  AppendTfRecord(std::string(1000, 'b'), &lie);
  int good = 0;
  absl::Status s = ReadAll(lie.substr(0, 12) + bytes, &good);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("truncated"));
}

TEST(EventFileWriterTest, WritesVersionScalarsAndHistograms) {
  TempFolder dir;
  auto writer = EventFileWriter::Create(dir.path() + "/run/metrics");
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = (*writer)->path();
  EXPECT_THAT(std::filesystem::path(path).filename().string(),
              ::testing::StartsWith("events.out.tfevents."));
  ASSERT_TRUE((*writer)->AddScalar("loss", 1, 2.5f).ok());
  ASSERT_TRUE((*writer)->AddScalar("loss", 2, 0.0f).ok());
  ASSERT_TRUE((*writer)->AddHistogram("values", 2, {1.0, 2.0, 2.0, 4.0}).ok());
  auto counts = HistogramOfCounts({3, 0, 1});
  ASSERT_TRUE(counts.ok());
  ASSERT_TRUE((*writer)->AddHistogram("staleness", 2, *counts).ok());
  ASSERT_TRUE((*writer)->Flush().ok());

  auto events = ReadEventFile(path);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 5u);
  EXPECT_EQ((*events)[0].file_version(), "brain.Event:2");
  for (const tensorboard::Event& e : *events) EXPECT_GT(e.wall_time(), 1.6e9);
  const auto& loss1 = (*events)[1];
  EXPECT_EQ(loss1.step(), 1);
  ASSERT_EQ(loss1.summary().value_size(), 1);
  EXPECT_EQ(loss1.summary().value(0).tag(), "loss");
  EXPECT_EQ(loss1.summary().value(0).simple_value(), 2.5f);
  // A zero scalar is still present (simple_value is in a oneof).
  EXPECT_TRUE((*events)[2].summary().value(0).has_simple_value());

  const tensorboard::HistogramProto& h =
      (*events)[3].summary().value(0).histo();
  EXPECT_EQ(h.min(), 1.0);
  EXPECT_EQ(h.max(), 4.0);
  EXPECT_EQ(h.num(), 4.0);
  EXPECT_EQ(h.sum(), 9.0);
  EXPECT_EQ(h.sum_squares(), 25.0);
  double total = 0;
  for (double c : h.bucket()) total += c;
  EXPECT_EQ(total, 4.0);
  EXPECT_EQ(h.bucket_limit(h.bucket_limit_size() - 1), 4.0);

  const tensorboard::HistogramProto& s =
      (*events)[4].summary().value(0).histo();
  EXPECT_THAT(s.bucket_limit(), ::testing::ElementsAre(0, 1, 2));
  EXPECT_THAT(s.bucket(), ::testing::ElementsAre(3, 0, 1));
  EXPECT_EQ(s.min(), 0);
  EXPECT_EQ(s.max(), 2);
  EXPECT_EQ(s.num(), 4);
  EXPECT_EQ(s.sum(), 2);
}

TEST(EventFileWriterTest, TwoWritersInOneSecondGetTwoFiles) {
  TempFolder dir;
  auto a = EventFileWriter::Create(dir.path());
  auto b = EventFileWriter::Create(dir.path());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
  auto files = ListEventFiles(dir.path());
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 2u);
}

TEST(EventFileWriterTest, RejectsBadHistogramsAndWritesNothing) {
  TempFolder dir;
  auto writer = EventFileWriter::Create(dir.path());
  ASSERT_TRUE(writer.ok());
  absl::Status s = (*writer)->AddHistogram("h", 1, {1.0, std::nan("")});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("h: histogram: value 1"));
  tensorboard::HistogramProto bad;
  bad.add_bucket_limit(2);
  bad.add_bucket_limit(1);
  bad.add_bucket(1);
  bad.add_bucket(1);
  s = (*writer)->AddHistogram("h", 1, bad);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("increase strictly"));
  bad.add_bucket(0);
  EXPECT_TRUE(absl::IsInvalidArgument((*writer)->AddHistogram("h", 1, bad)));
  ASSERT_TRUE((*writer)->Flush().ok());
  auto events = ReadEventFile((*writer)->path());
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 1u);  // the file version only
}

TEST(EventFileWriterTest, ConcurrentWritersProduceWholeRecords) {
  TempFolder dir;
  auto writer = EventFileWriter::Create(dir.path());
  ASSERT_TRUE(writer.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        ASSERT_TRUE((*writer)->AddScalar("t" + std::to_string(t), i, i).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::string path = (*writer)->path();
  writer->reset();  // flushes and closes
  auto events = ReadEventFile(path);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->size(), 1u + 4 * 200);
}

TEST(EventFileReaderTest, TruncatedEventFileIsDataLoss) {
  TempFolder dir;
  std::string path;
  {
    auto writer = EventFileWriter::Create(dir.path());
    ASSERT_TRUE(writer.ok());
    path = (*writer)->path();
    ASSERT_TRUE((*writer)->AddScalar("a", 1, 1).ok());
  }
  std::string bytes = Slurp(path);
  Spit(path, bytes.substr(0, bytes.size() - 3));
  auto events = ReadEventFile(path);
  EXPECT_TRUE(absl::IsDataLoss(events.status())) << events.status();
  EXPECT_THAT(std::string(events.status().message()), HasSubstr(path));
}

TEST(EventFileReaderTest, ARecordThatIsNotAnEventIsDataLoss) {
  TempFolder dir;
  const std::string path = dir.path() + "/events.out.tfevents.1.x";
  std::string bytes;
  AppendTfRecord("\xff\xff\xff", &bytes);  // not a valid protobuf
  Spit(path, bytes);
  auto events = ReadEventFile(path);
  EXPECT_TRUE(absl::IsDataLoss(events.status())) << events.status();
  EXPECT_THAT(std::string(events.status().message()),
              HasSubstr("not an Event"));
}

TEST(SummaryHistogramTest, EqualWidthBucketsCountEveryValueOnce) {
  std::vector<double> values;
  for (int i = 0; i <= 100; ++i) values.push_back(i * 0.1 - 3);
  auto h = HistogramOfValues(values, 7);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(ValidateHistogram(*h).ok());
  ASSERT_EQ(h->bucket_size(), 7);
  double total = 0;
  for (int i = 0; i < 7; ++i) total += h->bucket(i);
  EXPECT_EQ(total, 101);
  // Every value lies in its bucket: (limit[i-1], limit[i]].
  for (double v : values) {
    int i = 0;
    while (v > h->bucket_limit(i)) ++i;
    ASSERT_LT(i, 7);
  }
  EXPECT_EQ(h->bucket_limit(6), h->max());
}

TEST(SummaryHistogramTest, EdgeCases) {
  auto same = HistogramOfValues({2.0, 2.0});
  ASSERT_TRUE(same.ok());
  EXPECT_THAT(same->bucket(), ::testing::ElementsAre(2));
  auto none = HistogramOfValues({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->num(), 0);
  EXPECT_TRUE(ValidateHistogram(*none).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(HistogramOfValues({1.0}, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(HistogramOfCounts({1, -1}).status()));
  auto empty_counts = HistogramOfCounts({});
  ASSERT_TRUE(empty_counts.ok());
  EXPECT_TRUE(ValidateHistogram(*empty_counts).ok());
}

}  // namespace
}  // namespace tessera
