#include "data/records/tf_record_file_writer.h"

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/io/tf_record.h"
#include "data/io/gz_file.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<TfRecordFileWriter>> TfRecordFileWriter::Open(
    const std::string& path, bool gzip) {
  // "T": zlib writes the bytes through uncompressed.
  absl::StatusOr<gzFile> f = OpenGzFile(path, gzip ? "wb6" : "wbT");
  if (!f.ok()) return f.status();
  return std::unique_ptr<TfRecordFileWriter>(new TfRecordFileWriter(path, *f));
}

TfRecordFileWriter::~TfRecordFileWriter() {
  if (file_ != nullptr) gzclose(file_);
}

absl::Status TfRecordFileWriter::Write(absl::string_view record) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": closed"));
  }
  framed_.clear();
  AppendTfRecord(record, &framed_);
  if (gzwrite(file_, framed_.data(), static_cast<unsigned>(framed_.size())) !=
      static_cast<int>(framed_.size())) {
    int errnum = 0;
    return absl::DataLossError(
        absl::StrCat(path_, ": write failed: ", gzerror(file_, &errnum)));
  }
  return absl::OkStatus();
}

absl::Status TfRecordFileWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  const int rc = gzclose(file_);
  file_ = nullptr;
  if (rc != Z_OK) {
    return absl::DataLossError(
        absl::StrCat(path_, ": close failed (zlib error ", rc, ")"));
  }
  return absl::OkStatus();
}

}  // namespace tessera
