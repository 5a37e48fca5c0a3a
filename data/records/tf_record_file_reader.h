// Reads the records of a TFRecord file (common/io/tf_record.h's framing),
// plain, or compressed as TensorFlow's compression_type="GZIP" (one gzip
// stream of the framed records) or "ZLIB" (one zlib-wrapped deflate
// stream) writes it. The compression is told from the first bytes:
//  - the gzip magic 1f 8b: GZIP;
//  - a valid TFRecord header (a length and its masked CRC-32C): plain;
//  - else a zlib header (zlib_file_reader.h LooksLikeZlibHeader): ZLIB;
//  - else plain (whose first record then fails its length CRC).
// The header check comes before the zlib check because a plain file whose
// first record is 376 bytes long starts with 78 01, a valid zlib header;
// a zlib stream passes the 32-bit CRC check only by chance (1 in 2^32).
//
// Contract (besides RecordReader's):
//  - Both CRCs of every returned record are checked; a record cut short, a
//    length CRC or data CRC that does not match, or a length over
//    kMaxRecordBytes is DataLoss naming the file, the record's index and its
//    byte offset (in the decompressed stream).
//  - A data CRC that does not match consumes the record (index() moves
//    past it), so a caller that skips bad records can go on; every other
//    error is final.
//  - Skip checks each passed record's length CRC, not its data CRC; on a
//    plain file it seeks over the data.

#ifndef TESSERA_DATA_RECORDS_TF_RECORD_FILE_READER_H_
#define TESSERA_DATA_RECORDS_TF_RECORD_FILE_READER_H_

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/io/zlib_file_reader.h"
#include "data/records/record_reader.h"

namespace tessera {

class TfRecordFileReader final : public RecordReader {
 public:
  // A record this large is taken for a corrupt length (whose CRC matched by
  // chance, or a file written with a bad length) rather than allocated.
  static constexpr int64_t kMaxRecordBytes = int64_t{256} << 20;

  static absl::StatusOr<std::unique_ptr<TfRecordFileReader>> Open(
      const std::string& path);
  ~TfRecordFileReader() override;
  TfRecordFileReader(const TfRecordFileReader&) = delete;
  TfRecordFileReader& operator=(const TfRecordFileReader&) = delete;

  absl::StatusOr<bool> Next(absl::string_view* record) override;
  absl::StatusOr<int64_t> Skip(int64_t n) override;
  int64_t index() const override { return index_; }
  std::string Where() const override;

  enum class Compression { kNone, kGzip, kZlib };
  Compression compression() const { return compression_; }

 private:
  // Exactly one of `file` (plain or gzip) and `zlib` is set.
  TfRecordFileReader(std::string path, Compression compression, gzFile file,
                     int fd, std::unique_ptr<ZlibFileReader> zlib);
  // Reads up to `room` decompressed bytes to `to`: 0 at the end of the
  // file; errors name the next record.
  absl::StatusOr<int64_t> Read(char* to, int64_t room);
  // Makes at least n unread bytes available in buffer_; false when the
  // file ends first (what it had is buffered).
  absl::StatusOr<bool> Ensure(int64_t n);
  // Reads the next header; false at a clean end of file. Sets *length.
  absl::StatusOr<bool> Header(uint64_t* length);
  absl::Status Fail(absl::Status status);
  absl::Status Corrupt(absl::string_view what);
  // The next record, which the reader's own errors are about.
  std::string Here() const;

  const std::string path_;
  const Compression compression_;
  gzFile file_;   // plain and gzip files
  const int fd_;  // owned by file_ (-1 for zlib files)
  std::unique_ptr<ZlibFileReader> zlib_;
  std::vector<char> buffer_;
  int64_t begin_ = 0;  // unread bytes are buffer_[begin_, end_)
  int64_t end_ = 0;
  bool eof_ = false;
  int64_t index_ = 0;
  int64_t offset_ = 0;  // byte offset of the next record
  absl::Status error_;
};

}  // namespace tessera

#endif  // TESSERA_DATA_RECORDS_TF_RECORD_FILE_READER_H_
