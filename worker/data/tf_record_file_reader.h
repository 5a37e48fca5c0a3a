// Reads the records of a TFRecord file (common/tf_record.h's framing),
// plain or GZIP-compressed as TensorFlow's compression_type="GZIP" writes
// it (one gzip stream of the framed records). zlib tells the two apart by
// the gzip magic and passes plain files through.
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

#ifndef TESSERA_WORKER_DATA_TF_RECORD_FILE_READER_H_
#define TESSERA_WORKER_DATA_TF_RECORD_FILE_READER_H_

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/data/record_reader.h"

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

  // Whether the file is gzip-compressed (known after the first read).
  bool compressed() const { return gzdirect(file_) == 0; }

 private:
  TfRecordFileReader(std::string path, gzFile file, int fd);
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
  gzFile file_;
  const int fd_;  // owned by file_
  std::vector<char> buffer_;
  int64_t begin_ = 0;  // unread bytes are buffer_[begin_, end_)
  int64_t end_ = 0;
  bool eof_ = false;
  int64_t index_ = 0;
  int64_t offset_ = 0;  // byte offset of the next record
  absl::Status error_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_DATA_TF_RECORD_FILE_READER_H_
