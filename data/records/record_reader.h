// The records of one data file, in order: TFRecord records or the data
// lines of a CSV file. Stream readers and record counting see every format
// through this, so skipping and counting are written once per format.
//
// Contract:
//  - Compression is detected from the file's first bytes (gzip magic; for
//    TFRecord also a zlib header, tf_record_file_reader.h), never from its
//    name; a compressed stream must be complete (DataLoss otherwise).
//  - Every error message starts with Where(): the path and the record
//    index (TFRecord) or line number (CSV) of the bad record.
//  - After an error every later call returns an error, unless index()
//  moved past the bad record (a TFRecord data CRC): then reading goes on.
//  - Thread safety: one thread at a time.

#ifndef TESSERA_DATA_RECORDS_RECORD_READER_H_
#define TESSERA_DATA_RECORDS_RECORD_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/records/csv_parser.h"

namespace tessera {

class RecordReader {
 public:
  virtual ~RecordReader() = default;

  // Sets *record to the next record (valid until the next call) and
  // returns true; false at the end of the file.
  virtual absl::StatusOr<bool> Next(absl::string_view* record) = 0;

  // Passes over up to n records without returning them, checking only what
  // finding the next record needs (a plain TFRecord file seeks past the
  // data, unchecked); returns how many it passed (fewer at the end).
  virtual absl::StatusOr<int64_t> Skip(int64_t n) = 0;

  // The 0-based index of the next record.
  virtual int64_t index() const = 0;

  // Where the record last returned by Next is (the first record before
  // any): "path: record 12" (0-based) or, for CSV, "path:14" (its line).
  virtual std::string Where() const = 0;

  // CSV with a header: the column names its first line gives; else empty.
  virtual const std::vector<std::string>& header() const {
    static const std::vector<std::string>* const kNone =
        new std::vector<std::string>;
    return *kNone;
  }
};

// Opens `path` as a file of `format` ("tfrecord" or "csv"; `csv` says
// whether a header line comes first). NotFound when the file does not
// exist.
absl::StatusOr<std::unique_ptr<RecordReader>> OpenRecordReader(
    const std::string& format, const std::string& path, const CsvOptions& csv);

// The number of records in `path`, reading it through (gzip files must be
// decompressed; plain TFRecord files are walked by record lengths).
absl::StatusOr<int64_t> CountRecords(const std::string& format,
                                     const std::string& path,
                                     const CsvOptions& csv);

}  // namespace tessera

#endif  // TESSERA_DATA_RECORDS_RECORD_READER_H_
