// Reads the bytes of a file holding a zlib-wrapped deflate stream (RFC
// 1950), as TensorFlow writes TFRecord files with compression_type="ZLIB".
// gzread (which TfRecordFileReader uses for plain and GZIP files) reads
// gzip or raw bytes only, so this inflates the file itself.
//
// Contract:
//  - Read fills up to `n` bytes and returns how many; 0 only at the end
//    of the file, after a complete stream (its Adler-32 checked by zlib).
//    Streams written one after another are read as one (as gzread reads
//    gzip members); anything else after a stream is corrupt.
//  - Errors (DataLoss for a corrupt or truncated stream, an errno-derived
//    code for a read error) carry zlib's or the system's reason but no
//    path: the caller names the file and record. A Read that meets an
//    error after inflating some bytes returns those bytes; the next Read
//    returns the error, and so does every later one.
//  - Thread safety: one thread at a time.

#ifndef TESSERA_DATA_IO_ZLIB_FILE_READER_H_
#define TESSERA_DATA_IO_ZLIB_FILE_READER_H_

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

// Whether `first2` (a file's first two bytes) make a zlib header: deflate
// (CMF low nibble 8) with a window of at most 32 KiB, FCHECK making
// CMF * 256 + FLG a multiple of 31, and no preset dictionary (which TF
// never writes and a reader could not supply).
bool LooksLikeZlibHeader(const unsigned char first2[2]);

class ZlibFileReader {
 public:
  // Takes ownership of `fd`, positioned at the stream's first byte.
  // `buffer_bytes`: compressed bytes read from the file at a time.
  static absl::StatusOr<std::unique_ptr<ZlibFileReader>> Open(
      int fd, int64_t buffer_bytes);
  ~ZlibFileReader();
  ZlibFileReader(const ZlibFileReader&) = delete;
  ZlibFileReader& operator=(const ZlibFileReader&) = delete;

  absl::StatusOr<int64_t> Read(char* out, int64_t n);

 private:
  ZlibFileReader(int fd, int64_t buffer_bytes);
  absl::Status Fail(absl::Status status);
  // Records the error; returns `produced` when positive, else the error.
  absl::StatusOr<int64_t> FailAfter(int64_t produced, absl::Status status);
  // Refills in_ from the file; false at its end.
  absl::StatusOr<bool> Refill();

  const int fd_;
  std::vector<unsigned char> in_;
  z_stream zs_ = {};
  bool initialized_ = false;
  bool stream_ended_ = false;  // the last stream's end was read
  bool eof_ = false;           // the file has no more bytes
  absl::Status error_;
};

}  // namespace tessera

#endif  // TESSERA_DATA_IO_ZLIB_FILE_READER_H_
