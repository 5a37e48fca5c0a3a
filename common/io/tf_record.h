#ifndef TESSERA_COMMON_TF_RECORD_H_
#define TESSERA_COMMON_TF_RECORD_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// TFRecord framing, as TensorFlow's event files (and Tessera's own record
// files) use it. One record is
//
//   uint64  length               little-endian
//   uint32  masked crc32c(length bytes)
//   byte    data[length]
//   uint32  masked crc32c(data)
//
// with common/io/crc32c.h's CRC-32C and mask.

inline constexpr int64_t kTfRecordHeaderBytes = 12;
inline constexpr int64_t kTfRecordFooterBytes = 4;

// Appends the framed record of `data` to `out`.
void AppendTfRecord(absl::string_view data, std::string* out);

// Reads the records of one file in order, checking both CRCs of each.
//
// Thread safety: none; one reader per thread.
class TfRecordReader {
 public:
  // NotFound when `path` does not exist, an IO error when it cannot be read.
  static absl::StatusOr<std::unique_ptr<TfRecordReader>> Open(
      const std::string& path);

  TfRecordReader(const TfRecordReader&) = delete;
  TfRecordReader& operator=(const TfRecordReader&) = delete;
  ~TfRecordReader();

  // Reads the next record into `*record`. Returns OutOfRange at the end of
  // the file when the previous record ended exactly there, and DataLoss
  // (naming the file and the record's byte offset) when a record is cut
  // short or a CRC does not match. After an error, every later call
  // returns the same error.
  absl::Status Next(std::string* record);

  // Byte offset of the next record.
  int64_t offset() const { return offset_; }

 private:
  TfRecordReader(std::string path, std::FILE* file, int64_t file_bytes);
  absl::Status Corrupt(absl::string_view what);

  const std::string path_;
  std::FILE* const file_;
  const int64_t file_bytes_;
  int64_t offset_ = 0;
  absl::Status error_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_TF_RECORD_H_
