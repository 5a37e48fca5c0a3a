#include "data/criteo/criteo_reader.h"

#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/criteo/ctr_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A line of the small format used by most tests: 2 integer columns and 3
// categorical ones.
constexpr CriteoFormat kSmall{2, 3};

std::string Line(const std::vector<std::string>& columns) {
  return absl::StrJoin(columns, "\t") + "\n";
}

class CriteoReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/criteo_reader_test_", getpid(), "_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WritePlain(const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream out(path, std::ios::binary);
    out << text;
    return path;
  }

  std::string WriteGz(const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(dir_, "/", name);
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, text.data(), text.size()),
              static_cast<int>(text.size()));
    EXPECT_EQ(gzclose(f), Z_OK);
    return path;
  }

  // Loads `text` with the small format and returns the error message.
  std::string ErrorOf(const std::string& text) {
    const std::string path = WritePlain("bad.tsv", text);
    absl::StatusOr<CtrDataset> data = LoadCriteo(path, 0, -1, kSmall);
    EXPECT_FALSE(data.ok());
    EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument)
        << data.status();
    EXPECT_THAT(data.status().message(), HasSubstr(path + ":"));
    return std::string(data.status().message());
  }

  std::string dir_;
};

std::string ThreeExamples() {
  return Line({"1", "0", "5", "68fd1e64", "80e26c9b", "fb936136"}) +
         Line({"0", "", "-3", "", "0A", ""}) +
         Line({"1", "12", "", "ffffffffffffffff", "1,2,1", "abc"});
}

void ExpectThreeExamples(const CtrDataset& data) {
  ASSERT_EQ(data.size, 3);
  EXPECT_EQ(data.first, 0);
  EXPECT_EQ(data.num_dense, 2);
  EXPECT_EQ(data.num_fields, 3);
  EXPECT_THAT(data.labels, ElementsAre(1.0f, 0.0f, 1.0f));
  // log(1 + x); a missing or negative integer is 0.
  EXPECT_THAT(data.dense, ElementsAre(0.0f, std::log1p(5.0f), 0.0f, 0.0f,
                                      std::log1p(12.0f), 0.0f));
  ASSERT_EQ(data.fields.size(), 3u);
  EXPECT_THAT(data.fields[0].offsets, ElementsAre(0, 1, 1, 2));
  EXPECT_THAT(data.fields[0].ids, ElementsAre(0x68fd1e64, -1));
  EXPECT_THAT(data.fields[1].offsets, ElementsAre(0, 1, 2, 5));
  EXPECT_THAT(data.fields[1].ids, ElementsAre(0x80e26c9b, 10, 1, 2, 1));
  EXPECT_THAT(data.fields[2].offsets, ElementsAre(0, 1, 1, 2));
  EXPECT_THAT(data.fields[2].ids, ElementsAre(0xfb936136, 0xabc));
}

TEST_F(CriteoReaderTest, ReadsPlainAndGzippedFiles) {
  for (const std::string& path : {WritePlain("a.tsv", ThreeExamples()),
                                  WriteGz("a.tsv.gz", ThreeExamples())}) {
    absl::StatusOr<CtrDataset> data = LoadCriteo(path, 0, -1, kSmall);
    ASSERT_TRUE(data.ok()) << data.status();
    ExpectThreeExamples(*data);
    absl::StatusOr<int64_t> count = CountCriteoExamples(path);
    ASSERT_TRUE(count.ok()) << count.status();
    EXPECT_EQ(*count, 3);
  }
}

TEST_F(CriteoReaderTest, ToleratesCrlfAndAMissingLastNewline) {
  std::string text = ThreeExamples();
  text.pop_back();  // no '\n' after the last line
  std::string crlf;
  for (char c : text) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  absl::StatusOr<CtrDataset> data =
      LoadCriteo(WritePlain("crlf.tsv", crlf), 0, -1, kSmall);
  ASSERT_TRUE(data.ok()) << data.status();
  ExpectThreeExamples(*data);
}

TEST_F(CriteoReaderTest, AllMissingAndEmptyFile) {
  absl::StatusOr<CtrDataset> data = LoadCriteo(
      WritePlain("m.tsv", Line({"0", "", "", "", "", ""})), 0, -1, kSmall);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size, 1);
  EXPECT_THAT(data->dense, ElementsAre(0.0f, 0.0f));
  for (const CtrFieldColumn& field : data->fields) {
    EXPECT_THAT(field.offsets, ElementsAre(0, 0));
    EXPECT_THAT(field.ids, IsEmpty());
  }
  data = LoadCriteo(WritePlain("empty.tsv", ""), 0, -1, kSmall);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size, 0);
  EXPECT_THAT(data->fields[0].offsets, ElementsAre(0));
}

TEST_F(CriteoReaderTest, DefaultFormatIsCriteos) {
  std::vector<std::string> columns = {"1"};
  for (int j = 0; j < 13; ++j) columns.push_back(absl::StrCat(j));
  for (int f = 0; f < 26; ++f) columns.push_back(absl::StrCat(f + 1, "a"));
  absl::StatusOr<CtrDataset> data =
      LoadCriteo(WritePlain("criteo.tsv", Line(columns) + Line(columns)));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size, 2);
  EXPECT_EQ(data->num_dense, 13);
  EXPECT_EQ(data->num_fields, 26);
  EXPECT_FLOAT_EQ(data->dense[12], std::log1p(12.0f));
  EXPECT_THAT(data->fields[25].ids, ElementsAre(0x26a, 0x26a));
  // The small format rejects it, naming the column count.
  EXPECT_THAT(ErrorOf(Line(columns)),
              AllOf(HasSubstr(":1:"), HasSubstr("expected 6")));
}

TEST_F(CriteoReaderTest, LoadsSlices) {
  std::string text;
  for (int i = 0; i < 10; ++i) {
    text +=
        Line({i % 2 ? "1" : "0", absl::StrCat(i), "", absl::StrCat(i), "", ""});
  }
  // A bad line outside the slice is never parsed.
  text += "garbage\n";
  const std::string path = WriteGz("s.tsv.gz", text);
  absl::StatusOr<CtrDataset> data = LoadCriteo(path, 3, 4, kSmall);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size, 4);
  EXPECT_EQ(data->first, 3);
  EXPECT_THAT(data->labels, ElementsAre(1, 0, 1, 0));
  EXPECT_THAT(data->fields[0].ids, ElementsAre(3, 4, 5, 6));
  EXPECT_FLOAT_EQ(data->dense[0], std::log1p(3.0f));

  data = LoadCriteo(path, 0, 10, kSmall);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size, 10);
  // Line 11 is the garbage line.
  EXPECT_THAT(LoadCriteo(path, 9, -1, kSmall).status().message(),
              HasSubstr(":11:"));

  // Slices past the end of a file without the garbage line.
  const std::string clean =
      WritePlain("clean.tsv", text.substr(0, text.rfind("garbage")));
  for (auto [first, count] : std::vector<std::pair<int64_t, int64_t>>{
           {11, -1}, {8, 3}, {0, 20}, {-1, 2}, {0, -2}}) {
    absl::StatusOr<CtrDataset> bad = LoadCriteo(clean, first, count, kSmall);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange)
        << first << " " << count << ": " << bad.status();
  }
  EXPECT_THAT(LoadCriteo(clean, 11, -1, kSmall).status().message(),
              HasSubstr("out of range for 10 examples"));
  // Empty slices are fine inside the file, not past its end.
  data = LoadCriteo(path, 5, 0, kSmall);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size, 0);
  EXPECT_EQ(LoadCriteo(path, 12, 0, kSmall).status().code(),
            absl::StatusCode::kOutOfRange);
  // An empty slice at the end is fine.
  data = LoadCriteo(WritePlain("t.tsv", ThreeExamples()), 3, -1, kSmall);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size, 0);
}

TEST_F(CriteoReaderTest, BadInputsNameLineColumnAndText) {
  const std::string good = Line({"0", "1", "2", "a", "b", "c"});
  EXPECT_THAT(ErrorOf(good + Line({"0", "1", "2", "a", "b"})),
              AllOf(HasSubstr(":2:"), HasSubstr("expected 6 tab-separated"),
                    HasSubstr("got 5")));
  EXPECT_THAT(ErrorOf(good + Line({"0", "1", "2", "a", "b", "c", "d"})),
              AllOf(HasSubstr(":2:"), HasSubstr("got more")));
  EXPECT_THAT(ErrorOf(good + "\n"),
              AllOf(HasSubstr(":2:"), HasSubstr("got 1")));
  EXPECT_THAT(ErrorOf(Line({"2", "1", "2", "a", "b", "c"})),
              AllOf(HasSubstr(":1: column 1 (label)"),
                    HasSubstr("must be 0 or 1"), HasSubstr("\"2\"")));
  EXPECT_THAT(ErrorOf(Line({"", "1", "2", "a", "b", "c"})),
              HasSubstr("column 1 (label): label must be 0 or 1: \"\""));
  EXPECT_THAT(ErrorOf(good + good + Line({"1", "1", "x7", "a", "b", "c"})),
              AllOf(HasSubstr(":3: column 3 (I2)"),
                    HasSubstr("not a 64-bit integer"), HasSubstr("\"x7\"")));
  EXPECT_THAT(ErrorOf(Line({"1", "1.5", "1", "a", "b", "c"})),
              AllOf(HasSubstr("column 2 (I1)"), HasSubstr("\"1.5\"")));
  EXPECT_THAT(ErrorOf(Line({"1", "-", "1", "a", "b", "c"})),
              HasSubstr("column 2 (I1)"));
  EXPECT_THAT(
      ErrorOf(Line({"1", "99999999999999999999", "1", "a", "b", "c"})),
      AllOf(HasSubstr("column 2 (I1)"), HasSubstr("not a 64-bit integer")));
  EXPECT_THAT(ErrorOf(Line({"1", "9223372036854775808", "1", "a", "b", "c"})),
              HasSubstr("column 2 (I1)"));
  EXPECT_THAT(ErrorOf(Line({"1", "1", "1", "a", "xyz", "c"})),
              AllOf(HasSubstr("column 5 (C2)"),
                    HasSubstr("bad hexadecimal id \"xyz\"")));
  EXPECT_THAT(ErrorOf(Line({"1", "1", "1", "a", "b", "12345678901234567"})),
              AllOf(HasSubstr("column 6 (C3)"), HasSubstr("bad hexadecimal")));
  EXPECT_THAT(
      ErrorOf(Line({"1", "1", "1", "a,,b", "b", "c"})),
      AllOf(HasSubstr("column 4 (C1)"), HasSubstr("bad hexadecimal id \"\"")));
  EXPECT_THAT(ErrorOf(Line({"1", "1", "1", "a,", "b", "c"})),
              AllOf(HasSubstr("column 4 (C1)"), HasSubstr("after the last")));
  EXPECT_THAT(ErrorOf(Line({"1", "1", "1", "0x1f", "b", "c"})),
              HasSubstr("\"0x1f\""));
  // Control bytes are escaped in the message.
  EXPECT_THAT(ErrorOf(Line({"1", "1", "1", std::string("\x01z", 2), "b", "c"})),
              HasSubstr("\\x01z"));
}

// Examples to predict may come without the label column; only a format
// that allows it reads them, and the first line decides for the file.
TEST_F(CriteoReaderTest, LabelColumnMayBeLeftOutForPrediction) {
  CriteoFormat optional = kSmall;
  optional.label_optional = true;
  const std::string unlabeled =
      Line({"0", "5", "68fd1e64", "80e26c9b", "fb936136"}) +
      Line({"", "-3", "", "0A", ""}) +
      Line({"12", "", "ffffffffffffffff", "1,2,1", "abc"});
  const std::string path = WritePlain("new.tsv", unlabeled);
  absl::StatusOr<CtrDataset> data = LoadCriteo(path, 0, -1, optional);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_FALSE(data->has_labels);
  EXPECT_THAT(data->labels, IsEmpty());
  CtrDataset labeled_copy = *data;
  labeled_copy.labels = {1.0f, 0.0f, 1.0f};
  ExpectThreeExamples(labeled_copy);  // the same features as with labels
  // A labeled file reads as before.
  data = LoadCriteo(WritePlain("old.tsv", ThreeExamples()), 0, -1, optional);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(data->has_labels);
  ExpectThreeExamples(*data);
  // A slice decides on its own first line.
  data = LoadCriteo(path, 1, 2, optional);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_FALSE(data->has_labels);
  EXPECT_EQ(data->size, 2);
  // Training needs the label: the column count is wrong.
  EXPECT_THAT(ErrorOf(unlabeled),
              AllOf(HasSubstr(":1:"), HasSubstr("expected 6 tab-separated"),
                    HasSubstr("got 5")));
}

TEST_F(CriteoReaderTest, RowsWithoutLabelsKeepTheErrorsOfMalformedRows) {
  CriteoFormat optional = kSmall;
  optional.label_optional = true;
  auto error_of = [&](const std::string& text) {
    const std::string path = WritePlain("bad.tsv", text);
    absl::StatusOr<CtrDataset> data = LoadCriteo(path, 0, -1, optional);
    EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument)
        << data.status();
    return std::string(data.status().message());
  };
  const std::string good = Line({"1", "2", "a", "b", "c"});
  // Neither count: both are named.
  EXPECT_THAT(error_of(Line({"1", "2", "a", "b"})),
              AllOf(HasSubstr(":1: expected 6"), HasSubstr("or 5 without"),
                    HasSubstr("got 4")));
  // Once the first line has no label, every line must have none.
  EXPECT_THAT(error_of(good + Line({"1", "1", "2", "a", "b", "c"})),
              AllOf(HasSubstr(":2: expected 5"), HasSubstr("no label"),
                    HasSubstr("got more")));
  EXPECT_THAT(error_of(Line({"0", "1", "2", "a", "b", "c"}) + good),
              AllOf(HasSubstr(":2: expected 6"), HasSubstr("label,"),
                    HasSubstr("got 5")));
  // Columns are named by their place in the line.
  EXPECT_THAT(error_of(good + Line({"1", "x7", "a", "b", "c"})),
              AllOf(HasSubstr(":2: column 2 (I2)"),
                    HasSubstr("not a 64-bit integer"), HasSubstr("\"x7\"")));
  EXPECT_THAT(error_of(Line({"1", "1", "a", "xyz", "c"})),
              AllOf(HasSubstr("column 4 (C2)"),
                    HasSubstr("bad hexadecimal id \"xyz\"")));
}

TEST_F(CriteoReaderTest, ExtremeIntegersAreInRange) {
  absl::StatusOr<CtrDataset> data = LoadCriteo(
      WritePlain("x.tsv", Line({"1", "9223372036854775807",
                                "-9223372036854775808", "", "", ""})),
      0, -1, kSmall);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_NEAR(data->dense[0], std::log1p(9223372036854775807.0), 1e-4);
  EXPECT_EQ(data->dense[1], 0.0f);
}

TEST_F(CriteoReaderTest, TruncatedOrCorruptGzipIsDataLoss) {
  // Enough distinct lines that the compressed stream is long.
  std::string text;
  for (int i = 0; i < 5000; ++i) {
    text += Line({i % 3 ? "0" : "1", absl::StrCat(i * 7919 % 1000), "",
                  absl::StrCat(absl::Hex(i * 2654435761u)), "", ""});
  }
  const std::string path = WriteGz("t.tsv.gz", text);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 1000u);
  const std::string cut = WritePlain("cut.tsv.gz", bytes.substr(0, 600));
  absl::StatusOr<CtrDataset> data = LoadCriteo(cut, 0, -1, kSmall);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss) << data.status();
  EXPECT_THAT(data.status().message(),
              AllOf(HasSubstr(cut), HasSubstr("truncated gzip")));
  EXPECT_EQ(CountCriteoExamples(cut).status().code(),
            absl::StatusCode::kDataLoss);
  // The first lines are readable when the slice stops before the cut.
  EXPECT_TRUE(LoadCriteo(cut, 0, 10, kSmall).ok());

  std::string flipped = bytes;
  flipped[bytes.size() - 6] ^= 0x55;  // in the CRC-32 of the trailer
  const std::string corrupt = WritePlain("bad.tsv.gz", flipped);
  data = LoadCriteo(corrupt, 0, -1, kSmall);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss) << data.status();
  EXPECT_THAT(data.status().message(), HasSubstr(corrupt));
}

TEST_F(CriteoReaderTest, MissingFileIsNotFound) {
  absl::StatusOr<CtrDataset> data = LoadCriteo(dir_ + "/nope.tsv");
  EXPECT_EQ(data.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(data.status().message(), HasSubstr("nope.tsv"));
}

// Column counts beyond 2^20 are refused before anything is reserved: a
// count of 100000 examples with 10^7 integer columns once reserved 4 TB.
TEST_F(CriteoReaderTest, TooManyColumnsIsInvalidArgument) {
  const std::string path = WritePlain("small.tsv", Line({"1", "2", "3"}));
  const int kMax = std::numeric_limits<int>::max();
  for (const CriteoFormat& format :
       {CriteoFormat{10000000, 26}, CriteoFormat{13, (1 << 20) + 1},
        CriteoFormat{kMax, kMax}, CriteoFormat{kMax, 1}}) {
    SCOPED_TRACE(absl::StrCat(format.num_dense, " ", format.num_fields));
    absl::StatusOr<CtrDataset> data = LoadCriteo(path, 0, 100000, format);
    EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument)
        << data.status();
    EXPECT_THAT(data.status().message(),
                AllOf(HasSubstr(path), HasSubstr("bad format"),
                      HasSubstr(absl::StrCat(format.num_dense, " integer")),
                      HasSubstr("1048576")));
  }
}

// Runs in a death test's child: limits the address space to 8 GiB, loads
// `count` examples of `path` and exits 0 when that is OutOfRange because
// the file holds 2 examples. The child skips TearDown, so it removes the
// file's directory itself.
void LoadUnderAddressSpaceLimit(const std::string& path, int64_t count,
                                const CriteoFormat& format) {
  const rlimit limit = {rlim_t{8} << 30, rlim_t{8} << 30};
  setrlimit(RLIMIT_AS, &limit);
  absl::StatusOr<CtrDataset> data = LoadCriteo(path, 0, count, format);
  const bool short_file =
      absl::IsOutOfRange(data.status()) &&
      absl::StrContains(data.status().message(), "out of range for 2 examples");
  std::error_code ignored;
  std::filesystem::remove_all(std::filesystem::path(path).parent_path(),
                              ignored);
  std::exit(short_file ? 0 : 1);
}

// The widest format allowed, with a count far beyond the file: the loader
// reserves a bounded amount, so it runs in 8 GiB of address space (it once
// asked for 400 GB) and reports the short file as OutOfRange.
TEST_F(CriteoReaderTest, ReservesBoundedMemoryForAnyCount) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer needs more address space than the limit";
#endif
  const CriteoFormat wide{1 << 20, 1};
  // Label 1, every other column missing.
  const std::string line =
      "1" + std::string(wide.num_dense + wide.num_fields, '\t') + "\n";
  const std::string path = WritePlain("wide.tsv", line + line);
  absl::StatusOr<CtrDataset> data = LoadCriteo(path, 0, 2, wide);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->dense.size(), 2u << 20);
  // The child re-runs this test up to here (its own directory and file).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(LoadUnderAddressSpaceLimit(path, 100000, wide),
              ::testing::ExitedWithCode(0), "");
}

TEST_F(CriteoReaderTest, GathersBatchesByExampleIndex) {
  absl::StatusOr<CtrDataset> data =
      LoadCriteo(WritePlain("a.tsv", ThreeExamples()), 0, -1, kSmall);
  ASSERT_TRUE(data.ok()) << data.status();
  CtrBatch batch;
  const std::vector<int64_t> examples = {2, 0, 2};
  ASSERT_TRUE(GatherCtrBatch(*data, examples, &batch).ok());
  EXPECT_EQ(batch.size, 3);
  EXPECT_THAT(batch.labels, ElementsAre(1, 1, 1));
  EXPECT_THAT(batch.dense,
              ElementsAre(std::log1p(12.0f), 0.0f, 0.0f, std::log1p(5.0f),
                          std::log1p(12.0f), 0.0f));
  ASSERT_EQ(batch.fields.size(), 3u);
  EXPECT_THAT(batch.fields[1].offsets, ElementsAre(0, 3, 4, 7));
  EXPECT_THAT(batch.fields[1].ids, ElementsAre(1, 2, 1, 0x80e26c9b, 1, 2, 1));
  // Buffers are reused and resized.
  ASSERT_TRUE(GatherCtrBatch(*data, std::vector<int64_t>{1}, &batch).ok());
  EXPECT_EQ(batch.size, 1);
  EXPECT_THAT(batch.fields[0].offsets, ElementsAre(0, 0));
  EXPECT_THAT(batch.fields[0].ids, IsEmpty());
  EXPECT_THAT(batch.fields[1].ids, ElementsAre(10));

  absl::Status s = GatherCtrBatch(*data, std::vector<int64_t>{0, 3}, &batch);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("example 3"), HasSubstr("batch row 1")));
  EXPECT_FALSE(GatherCtrBatch(*data, std::vector<int64_t>{-1}, &batch).ok());
}

TEST(LocalizeIdsTest, MapsIdsToRowsOfTheDistinctIds) {
  std::vector<int64_t> unique, rows;
  LocalizeIds(std::vector<int64_t>{42, -7, 42, 1000, -7}, &unique, &rows);
  EXPECT_THAT(unique, ElementsAre(-7, 42, 1000));
  EXPECT_THAT(rows, ElementsAre(1, 0, 1, 2, 0));
  LocalizeIds({}, &unique, &rows);
  EXPECT_THAT(unique, IsEmpty());
  EXPECT_THAT(rows, IsEmpty());
}

}  // namespace
}  // namespace tessera
