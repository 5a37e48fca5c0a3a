#include "data/io/zlib_file_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "absl/strings/str_cat.h"

namespace tessera {

bool LooksLikeZlibHeader(const unsigned char first2[2]) {
  const unsigned cmf = first2[0], flg = first2[1];
  return (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && (cmf * 256 + flg) % 31 == 0 &&
         (flg & 0x20) == 0;
}

absl::StatusOr<std::unique_ptr<ZlibFileReader>> ZlibFileReader::Open(
    int fd, int64_t buffer_bytes) {
  std::unique_ptr<ZlibFileReader> reader(
      new ZlibFileReader(fd, std::max<int64_t>(buffer_bytes, 1)));
  if (inflateInit(&reader->zs_) != Z_OK) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "inflateInit: ",
        reader->zs_.msg != nullptr ? reader->zs_.msg : "out of memory"));
  }
  reader->initialized_ = true;
  return reader;
}

ZlibFileReader::ZlibFileReader(int fd, int64_t buffer_bytes)
    : fd_(fd), in_(buffer_bytes) {}

ZlibFileReader::~ZlibFileReader() {
  if (initialized_) inflateEnd(&zs_);
  close(fd_);
}

absl::Status ZlibFileReader::Fail(absl::Status status) {
  error_ = std::move(status);
  return error_;
}

absl::StatusOr<int64_t> ZlibFileReader::FailAfter(int64_t produced,
                                                  absl::Status status) {
  Fail(std::move(status));
  // What was inflated before the error is returned first, as gzread does;
  // the next call reports the error.
  if (produced > 0) return produced;
  return error_;
}

absl::StatusOr<bool> ZlibFileReader::Refill() {
  while (true) {
    const ssize_t got = read(fd_, in_.data(), in_.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Fail(absl::ErrnoToStatus(errno, "read error"));
    zs_.next_in = in_.data();
    zs_.avail_in = static_cast<uInt>(got);
    if (got == 0) eof_ = true;
    return got > 0;
  }
}

absl::StatusOr<int64_t> ZlibFileReader::Read(char* out, int64_t n) {
  if (!error_.ok()) return error_;
  int64_t produced = 0;
  while (produced < n) {
    if (zs_.avail_in == 0) {
      absl::StatusOr<bool> more = eof_ ? false : Refill();
      if (!more.ok()) return FailAfter(produced, more.status());
      if (!*more) {
        if (stream_ended_) return produced;
        return FailAfter(produced,
                         absl::DataLossError("truncated zlib stream"));
      }
    }
    if (stream_ended_) {
      // More bytes after a complete stream: they must be another stream
      // (inflate checks its header).
      inflateReset(&zs_);
      stream_ended_ = false;
    }
    const uInt room =
        static_cast<uInt>(std::min<int64_t>(n - produced, INT_MAX / 2));
    zs_.next_out = reinterpret_cast<Bytef*>(out + produced);
    zs_.avail_out = room;
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    produced += room - zs_.avail_out;
    if (rc == Z_STREAM_END) {
      stream_ended_ = true;
    } else if (rc == Z_NEED_DICT) {
      return FailAfter(
          produced,
          absl::DataLossError("corrupt zlib stream: it asks for a preset "
                              "dictionary"));
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      // Z_BUF_ERROR only says no progress was possible without more input,
      // which the next turn reads.
      return FailAfter(
          produced,
          absl::DataLossError(absl::StrCat(
              "corrupt zlib stream: ",
              zs_.msg != nullptr ? zs_.msg
                                 : absl::StrCat("inflate error ", rc))));
    }
  }
  return produced;
}

}  // namespace tessera
