#include "data/records/tf_record_file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/io/crc32c.h"
#include "common/io/tf_record.h"

namespace tessera {
namespace {

// zlib's default 8 KiB buffer makes decompression syscall-bound; beyond
// 256 KiB reads gain nothing measurable, and a reader opened per file (and
// per fuzzer input) should not cost megabytes of zeroed memory.
constexpr unsigned kGzBufferBytes = 256 << 10;
constexpr int64_t kReadBytes = 256 << 10;

uint64_t LoadLittleEndian(const char* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  return v;
}

bool CrcMatches(const char* data, size_t n, const char* stored) {
  return crc32c::Mask(crc32c::Value(data, n)) ==
         static_cast<uint32_t>(LoadLittleEndian(stored, 4));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TfRecordFileReader>> TfRecordFileReader::Open(
    const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  }
  // The file's first bytes say how it is compressed (see the header).
  unsigned char head[kTfRecordHeaderBytes] = {};
  ssize_t got = 0;
  do {
    got = pread(fd, head, sizeof(head), 0);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    const int errnum = errno;
    close(fd);
    return absl::ErrnoToStatus(errnum, absl::StrCat(path, ": read error"));
  }
  const bool gzip = got >= 2 && head[0] == 0x1f && head[1] == 0x8b;
  const bool framed = got == kTfRecordHeaderBytes &&
                      CrcMatches(reinterpret_cast<const char*>(head), 8,
                                 reinterpret_cast<const char*>(head) + 8);
  if (!gzip && !framed && got >= 2 && LooksLikeZlibHeader(head)) {
    absl::StatusOr<std::unique_ptr<ZlibFileReader>> zlib =
        ZlibFileReader::Open(fd, kGzBufferBytes);
    if (!zlib.ok()) {
      close(fd);
      return absl::Status(zlib.status().code(),
                          absl::StrCat(path, ": ", zlib.status().message()));
    }
    return std::unique_ptr<TfRecordFileReader>(new TfRecordFileReader(
        path, Compression::kZlib, nullptr, -1, *std::move(zlib)));
  }
  errno = 0;
  gzFile f = gzdopen(fd, "rb");
  if (f == nullptr) {
    close(fd);
    return absl::InternalError(absl::StrCat(path, ": gzdopen"));
  }
  gzbuffer(f, kGzBufferBytes);
  return std::unique_ptr<TfRecordFileReader>(new TfRecordFileReader(
      path, gzip ? Compression::kGzip : Compression::kNone, f, fd, nullptr));
}

TfRecordFileReader::TfRecordFileReader(std::string path,
                                       Compression compression, gzFile file,
                                       int fd,
                                       std::unique_ptr<ZlibFileReader> zlib)
    : path_(std::move(path)),
      compression_(compression),
      file_(file),
      fd_(fd),
      zlib_(std::move(zlib)),
      buffer_(2 * kReadBytes) {}

TfRecordFileReader::~TfRecordFileReader() {
  if (file_ != nullptr) gzclose(file_);
}

std::string TfRecordFileReader::Here() const {
  return absl::StrCat(path_, ": record ", index_);
}

std::string TfRecordFileReader::Where() const {
  return absl::StrCat(path_, ": record ", std::max<int64_t>(index_ - 1, 0));
}

absl::Status TfRecordFileReader::Fail(absl::Status status) {
  error_ = std::move(status);
  return error_;
}

absl::Status TfRecordFileReader::Corrupt(absl::string_view what) {
  return Fail(absl::DataLossError(
      absl::StrCat(Here(), " (byte ", offset_, "): ", what)));
}

absl::StatusOr<bool> TfRecordFileReader::Ensure(int64_t n) {
  while (end_ - begin_ < n) {
    if (eof_) return false;
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    const int64_t want = std::max(n, end_ + kReadBytes);
    if (static_cast<int64_t>(buffer_.size()) < want) buffer_.resize(want);
    const int64_t room = std::min<int64_t>(
        static_cast<int64_t>(buffer_.size()) - end_, INT_MAX / 2);
    absl::StatusOr<int64_t> got = Read(buffer_.data() + end_, room);
    if (!got.ok()) return got.status();
    if (*got == 0) eof_ = true;
    end_ += *got;
  }
  return true;
}

absl::StatusOr<int64_t> TfRecordFileReader::Read(char* to, int64_t room) {
  if (zlib_ != nullptr) {
    absl::StatusOr<int64_t> got = zlib_->Read(to, room);
    if (!got.ok()) {
      return Fail(
          absl::Status(got.status().code(),
                       absl::StrCat(Here(), ": ", got.status().message())));
    }
    return got;
  }
  const int got = gzread(file_, to, static_cast<unsigned>(room));
  int errnum = Z_OK;
  const char* message = gzerror(file_, &errnum);
  if (got < 0 || (errnum != Z_OK && errnum != Z_BUF_ERROR)) {
    if (errnum == Z_ERRNO && errno != 0) {
      return Fail(
          absl::ErrnoToStatus(errno, absl::StrCat(Here(), ": read error")));
    }
    absl::string_view msg = message;
    absl::ConsumePrefix(&msg, absl::StrCat(path_, ": "));
    return Fail(absl::DataLossError(
        absl::StrCat(Here(), ": corrupt gzip stream: ", msg)));
  }
  // Z_BUF_ERROR at the end: the input ended in the middle of a gzip stream.
  if (got == 0 && errnum == Z_BUF_ERROR) {
    return Fail(
        absl::DataLossError(absl::StrCat(Here(), ": truncated gzip stream")));
  }
  return got;
}

absl::StatusOr<bool> TfRecordFileReader::Header(uint64_t* length) {
  absl::StatusOr<bool> have = Ensure(kTfRecordHeaderBytes);
  if (!have.ok()) return have.status();
  if (!*have) {
    if (end_ == begin_) return false;
    return Corrupt(absl::StrCat("truncated record: ", end_ - begin_,
                                " bytes of its 12-byte header"));
  }
  const char* header = buffer_.data() + begin_;
  if (!CrcMatches(header, 8, header + 8)) {
    return Corrupt(
        "length CRC does not match (not a TFRecord file, or "
        "corrupt)");
  }
  *length = LoadLittleEndian(header, 8);
  if (*length > static_cast<uint64_t>(kMaxRecordBytes)) {
    return Corrupt(absl::StrCat("record length ", *length, " exceeds ",
                                kMaxRecordBytes, " bytes"));
  }
  return true;
}

absl::StatusOr<bool> TfRecordFileReader::Next(absl::string_view* record) {
  if (!error_.ok()) return error_;
  uint64_t length = 0;
  absl::StatusOr<bool> more = Header(&length);
  if (!more.ok() || !*more) return more;
  const int64_t total = kTfRecordHeaderBytes + static_cast<int64_t>(length) +
                        kTfRecordFooterBytes;
  absl::StatusOr<bool> have = Ensure(total);
  if (!have.ok()) return have.status();
  if (!*have) {
    return Corrupt(absl::StrCat("truncated record: ", length,
                                " bytes of data announced, ",
                                end_ - begin_ - kTfRecordHeaderBytes,
                                " bytes (with the CRC) left in the file"));
  }
  const char* data = buffer_.data() + begin_ + kTfRecordHeaderBytes;
  if (!CrcMatches(data, length, data + length)) {
    // The framing is intact, so the reader can go on past this record.
    absl::Status bad = absl::DataLossError(
        absl::StrCat(Here(), " (byte ", offset_, "): data CRC does not match"));
    begin_ += total;
    offset_ += total;
    ++index_;
    return bad;
  }
  *record = absl::string_view(data, length);
  begin_ += total;
  offset_ += total;
  ++index_;
  return true;
}

absl::StatusOr<int64_t> TfRecordFileReader::Skip(int64_t n) {
  if (!error_.ok()) return error_;
  int64_t skipped = 0;
  for (; skipped < n; ++skipped) {
    uint64_t length = 0;
    absl::StatusOr<bool> more = Header(&length);
    if (!more.ok()) return more.status();
    if (!*more) break;
    const int64_t total = kTfRecordHeaderBytes + static_cast<int64_t>(length) +
                          kTfRecordFooterBytes;
    if (end_ - begin_ >= total) {
      begin_ += total;
    } else if (compression_ == Compression::kNone) {
      // A plain file: seek over the rest, then check that the file is at
      // least that long (lseek past the end does not fail).
      const int64_t beyond = total - (end_ - begin_);
      begin_ = end_ = 0;
      const z_off_t after =
          gzseek(file_, static_cast<z_off_t>(beyond), SEEK_CUR);
      struct stat st = {};
      if (after < 0 || fstat(fd_, &st) != 0 || st.st_size < after) {
        return Corrupt(absl::StrCat("truncated record: ", length,
                                    " bytes of data announced"));
      }
    } else {
      // A gzip stream has to be decompressed anyway; going through the
      // buffer notices a stream that ends inside the record.
      int64_t remaining = total;
      while (remaining > 0) {
        const int64_t chunk = std::min(remaining, kReadBytes);
        absl::StatusOr<bool> have = Ensure(chunk);
        if (!have.ok()) return have.status();
        if (!*have) {
          return Corrupt(absl::StrCat("truncated record: ", length,
                                      " bytes of data announced"));
        }
        begin_ += chunk;
        remaining -= chunk;
      }
    }
    offset_ += total;
    ++index_;
  }
  return skipped;
}

}  // namespace tessera
