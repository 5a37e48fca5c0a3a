// Reads a text file line by line, plain or gzip-compressed (zlib passes
// plain files through unchanged), with large buffered reads.
//
// Contract:
//  - A line ends at '\n' (not included); a last line without one is still a
//    line; an empty file has no lines. '\r' is left to the caller.
//  - Every error message starts with the path. A missing file is NotFound
//    (an errno-derived code in general); a gzip stream that ends early is
//    DataLoss ("truncated gzip stream"), a corrupt one DataLoss with zlib's
//    message; a line longer than kMaxLineBytes is InvalidArgument, so that a
//    binary file cannot make the reader buffer it whole.
//  - Thread safety: one thread at a time.

#ifndef TESSERA_DATA_IO_GZ_LINE_READER_H_
#define TESSERA_DATA_IO_GZ_LINE_READER_H_

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

class GzLineReader {
 public:
  static constexpr int64_t kMaxLineBytes = int64_t{64} << 20;

  static absl::StatusOr<std::unique_ptr<GzLineReader>> Open(
      const std::string& path);
  ~GzLineReader();
  GzLineReader(const GzLineReader&) = delete;
  GzLineReader& operator=(const GzLineReader&) = delete;

  // Sets *line to the next line, valid until the next call, and returns
  // true; returns false at the end of the file (having checked that a gzip
  // stream is complete).
  absl::StatusOr<bool> Next(absl::string_view* line);

  // The 1-based number of the line last returned by Next (0 before).
  int64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }

 private:
  GzLineReader(std::string path, gzFile file);
  // Moves the unread bytes to the front and appends what the file gives;
  // returns the number of bytes appended (0 at the end of the file).
  absl::StatusOr<int64_t> Fill();

  const std::string path_;
  gzFile file_;
  std::vector<char> buffer_;
  int64_t begin_ = 0;  // unread bytes are buffer_[begin_, end_)
  int64_t end_ = 0;
  // Bytes of buffer_[begin_, end_) known to hold no '\n'.
  int64_t scanned_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_DATA_IO_GZ_LINE_READER_H_
