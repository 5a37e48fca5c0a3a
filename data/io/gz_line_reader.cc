#include "data/io/gz_line_reader.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "data/io/gz_file.h"

namespace tessera {
namespace {

// zlib's default 8 KiB buffer makes decompression syscall-bound.
constexpr int64_t kReadBytes = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<GzLineReader>> GzLineReader::Open(
    const std::string& path) {
  absl::StatusOr<gzFile> f = OpenGzFile(path, "rb");
  if (!f.ok()) return f.status();
  return std::unique_ptr<GzLineReader>(new GzLineReader(path, *f));
}

GzLineReader::GzLineReader(std::string path, gzFile file)
    : path_(std::move(path)), file_(file), buffer_(2 * kReadBytes) {}

GzLineReader::~GzLineReader() { gzclose(file_); }

absl::StatusOr<int64_t> GzLineReader::Fill() {
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (static_cast<int64_t>(buffer_.size()) - end_ < kReadBytes) {
    buffer_.resize(buffer_.size() * 2);
  }
  const int n = gzread(file_, buffer_.data() + end_,
                       static_cast<unsigned>(buffer_.size() - end_));
  int errnum = Z_OK;
  const char* message = gzerror(file_, &errnum);
  if (n < 0 || (errnum != Z_OK && errnum != Z_BUF_ERROR)) {
    const int saved_errno = errno;
    if (errnum == Z_ERRNO && saved_errno != 0) {
      return absl::ErrnoToStatus(saved_errno,
                                 absl::StrCat(path_, ": read error"));
    }
    if (errnum != Z_BUF_ERROR) {
      // zlib prefixes its messages with the path, which we add ourselves.
      absl::string_view msg = message;
      absl::ConsumePrefix(&msg, absl::StrCat(path_, ": "));
      return absl::DataLossError(
          absl::StrCat(path_, ": corrupt gzip stream: ", msg));
    }
  }
  if (n <= 0) {
    // Z_BUF_ERROR: the input ended in the middle of a gzip stream.
    if (errnum == Z_BUF_ERROR) {
      return absl::DataLossError(absl::StrCat(
          path_, ": truncated gzip stream (after line ", line_number_, ")"));
    }
    return 0;
  }
  end_ += n;
  return n;
}

absl::StatusOr<bool> GzLineReader::Next(absl::string_view* line) {
  while (true) {
    const char* start = buffer_.data() + begin_;
    const char* newline = static_cast<const char*>(
        std::memchr(start + scanned_, '\n', end_ - begin_ - scanned_));
    if (newline != nullptr) {
      *line = absl::string_view(start, newline - start);
      begin_ += (newline - start) + 1;
      scanned_ = 0;
      ++line_number_;
      return true;
    }
    scanned_ = end_ - begin_;
    if (scanned_ > kMaxLineBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ":", line_number_ + 1, ": line is longer than ",
                       kMaxLineBytes, " bytes"));
    }
    if (eof_) {
      if (begin_ == end_) return false;
      *line = absl::string_view(start, end_ - begin_);
      begin_ = end_;
      scanned_ = 0;
      ++line_number_;
      return true;
    }
    absl::StatusOr<int64_t> got = Fill();
    if (!got.ok()) return got.status();
    if (*got == 0) eof_ = true;
  }
}

}  // namespace tessera
