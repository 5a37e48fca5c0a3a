// Writes a TFRecord file (common/io/tf_record.h's framing), plain or as one
// gzip stream, which is what TensorFlow's TFRecordWriter writes with
// compression_type "" and "GZIP"; tf.data and TfRecordFileReader read both.
//
// Thread safety: one thread at a time.

#ifndef TESSERA_DATA_RECORDS_TF_RECORD_FILE_WRITER_H_
#define TESSERA_DATA_RECORDS_TF_RECORD_FILE_WRITER_H_

#include <zlib.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

class TfRecordFileWriter {
 public:
  // Creates (or truncates) `path`; errors name it.
  static absl::StatusOr<std::unique_ptr<TfRecordFileWriter>> Open(
      const std::string& path, bool gzip);
  ~TfRecordFileWriter();  // closes without reporting; call Close
  TfRecordFileWriter(const TfRecordFileWriter&) = delete;
  TfRecordFileWriter& operator=(const TfRecordFileWriter&) = delete;

  absl::Status Write(absl::string_view record);
  // Flushes and closes; the file is complete only when this returns OK.
  absl::Status Close();

 private:
  TfRecordFileWriter(std::string path, gzFile file)
      : path_(std::move(path)), file_(file) {}

  const std::string path_;
  gzFile file_;
  std::string framed_;
};

}  // namespace tessera

#endif  // TESSERA_DATA_RECORDS_TF_RECORD_FILE_WRITER_H_
