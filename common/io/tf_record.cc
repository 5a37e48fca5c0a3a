#include "common/io/tf_record.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/io/crc32c.h"

namespace tessera {
namespace {

uint32_t MaskedCrc(const char* data, size_t n) {
  return crc32c::Mask(crc32c::Value(data, n));
}

// Little-endian, byte by byte, so the format does not depend on the host.
void StoreFixed(uint64_t v, int bytes, char* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

uint64_t LoadFixed(const char* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  return v;
}

void AppendFixed32(uint32_t v, std::string* out) {
  char buf[4];
  StoreFixed(v, sizeof(buf), buf);
  out->append(buf, sizeof(buf));
}

}  // namespace

void AppendTfRecord(absl::string_view data, std::string* out) {
  char length[8];
  StoreFixed(data.size(), sizeof(length), length);
  out->append(length, sizeof(length));
  AppendFixed32(MaskedCrc(length, sizeof(length)), out);
  out->append(data.data(), data.size());
  AppendFixed32(MaskedCrc(data.data(), data.size()), out);
}

absl::StatusOr<std::unique_ptr<TfRecordReader>> TfRecordReader::Open(
    const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    const std::string message =
        absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    return absl::UnavailableError(message);
  }
  struct stat st = {};
  if (fstat(fileno(file), &st) != 0) {
    const int err = errno;
    std::fclose(file);
    return absl::UnavailableError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(err)));
  }
  return std::unique_ptr<TfRecordReader>(
      new TfRecordReader(path, file, static_cast<int64_t>(st.st_size)));
}

TfRecordReader::TfRecordReader(std::string path, std::FILE* file,
                               int64_t file_bytes)
    : path_(std::move(path)), file_(file), file_bytes_(file_bytes) {}

TfRecordReader::~TfRecordReader() { std::fclose(file_); }

absl::Status TfRecordReader::Corrupt(absl::string_view what) {
  error_ = absl::DataLossError(
      absl::StrCat(path_, ": record at byte ", offset_, ": ", what));
  return error_;
}

absl::Status TfRecordReader::Next(std::string* record) {
  if (!error_.ok()) return error_;
  char header[kTfRecordHeaderBytes];
  const size_t got = std::fread(header, 1, sizeof(header), file_);
  if (got == 0 && std::feof(file_)) {
    return absl::OutOfRangeError(absl::StrCat(path_, ": end of file"));
  }
  if (std::ferror(file_)) {
    error_ = absl::UnavailableError(
        absl::StrCat(path_, ": read error at byte ", offset_));
    return error_;
  }
  if (got != sizeof(header)) {
    return Corrupt(absl::StrCat("truncated header (", got, " of ",
                                sizeof(header), " bytes)"));
  }
  const uint32_t length_crc = static_cast<uint32_t>(LoadFixed(header + 8, 4));
  if (MaskedCrc(header, 8) != length_crc) {
    return Corrupt("length CRC does not match");
  }
  const uint64_t length = LoadFixed(header, 8);
  const int64_t remaining = file_bytes_ - offset_ - kTfRecordHeaderBytes;
  // The CRC matched, so only a lie about the length (or a file cut short)
  // gets here; checking against the file size avoids allocating for it.
  if (length > static_cast<uint64_t>(remaining)) {
    return Corrupt(absl::StrCat("truncated: says ", length,
                                " bytes of data, the file has ", remaining));
  }
  record->resize(length);
  char footer[kTfRecordFooterBytes];
  if (std::fread(record->data(), 1, length, file_) != length ||
      std::fread(footer, 1, sizeof(footer), file_) != sizeof(footer)) {
    return Corrupt(absl::StrCat("truncated (", length, " bytes of data)"));
  }
  if (MaskedCrc(record->data(), record->size()) != LoadFixed(footer, 4)) {
    return Corrupt("data CRC does not match");
  }
  offset_ += kTfRecordHeaderBytes + length + kTfRecordFooterBytes;
  return absl::OkStatus();
}

}  // namespace tessera
