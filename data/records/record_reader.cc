#include "data/records/record_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/data_format.h"
#include "data/io/gz_line_reader.h"
#include "data/records/csv_parser.h"
#include "data/records/tf_record_file_reader.h"

namespace tessera {
namespace {

// The data lines of a CSV file; the header line, when the format has one,
// is read at open.
class CsvRecordReader final : public RecordReader {
 public:
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(
      const std::string& path, const CsvOptions& csv) {
    absl::StatusOr<std::unique_ptr<GzLineReader>> lines =
        GzLineReader::Open(path);
    if (!lines.ok()) return lines.status();
    std::unique_ptr<CsvRecordReader> reader(
        new CsvRecordReader(*std::move(lines)));
    if (csv.header) {
      absl::string_view line;
      absl::StatusOr<bool> got = reader->lines_->Next(&line);
      if (!got.ok()) return got.status();
      if (!*got) {
        return absl::InvalidArgumentError(absl::StrCat(
            path,
            ": empty file, but the csv format expects a header line "
            "(or set csv.columns)"));
      }
      absl::StatusOr<std::vector<std::string>> header =
          CsvParser::SplitHeader(line, csv.delimiter);
      if (!header.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":1: header: ", header.status().message()));
      }
      reader->header_ = *std::move(header);
      reader->first_line_ = 1;
    }
    return std::unique_ptr<RecordReader>(std::move(reader));
  }

  absl::StatusOr<bool> Next(absl::string_view* record) override {
    absl::StatusOr<bool> got = lines_->Next(record);
    if (got.ok() && *got) ++index_;
    return got;
  }

  absl::StatusOr<int64_t> Skip(int64_t n) override {
    int64_t skipped = 0;
    absl::string_view line;
    for (; skipped < n; ++skipped) {
      absl::StatusOr<bool> got = lines_->Next(&line);
      if (!got.ok()) return got.status();
      if (!*got) break;
      ++index_;
    }
    return skipped;
  }

  int64_t index() const override { return index_; }

  std::string Where() const override {
    return absl::StrCat(
        lines_->path(), ":",
        std::max<int64_t>(lines_->line_number(), first_line_ + 1));
  }

  const std::vector<std::string>& header() const override { return header_; }

 private:
  explicit CsvRecordReader(std::unique_ptr<GzLineReader> lines)
      : lines_(std::move(lines)) {}

  std::unique_ptr<GzLineReader> lines_;
  std::vector<std::string> header_;
  int64_t first_line_ = 0;  // lines before the first record
  int64_t index_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordReader>> OpenRecordReader(
    const std::string& format, const std::string& path, const CsvOptions& csv) {
  if (DataFormatNamed(format) == DataFormat::kTfRecord) {
    absl::StatusOr<std::unique_ptr<TfRecordFileReader>> reader =
        TfRecordFileReader::Open(path);
    if (!reader.ok()) return reader.status();
    return std::unique_ptr<RecordReader>(*std::move(reader));
  }
  if (DataFormatNamed(format) == DataFormat::kCsv) {
    return CsvRecordReader::Open(path, csv);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("format \"", format, "\" is not streamed (tfrecord, csv)"));
}

absl::StatusOr<int64_t> CountRecords(const std::string& format,
                                     const std::string& path,
                                     const CsvOptions& csv) {
  absl::StatusOr<std::unique_ptr<RecordReader>> reader =
      OpenRecordReader(format, path, csv);
  if (!reader.ok()) return reader.status();
  int64_t total = 0;
  while (true) {
    absl::StatusOr<int64_t> n = (*reader)->Skip(int64_t{1} << 20);
    if (!n.ok()) return n.status();
    total += *n;
    if (*n < (int64_t{1} << 20)) return total;
  }
}

}  // namespace tessera
