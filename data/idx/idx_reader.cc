#include "data/idx/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "data/io/gz_file.h"

namespace tessera {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
constexpr int kMaxDims = 4;
// zlib's default 8 KiB buffer makes decompression syscall-bound; 1 MiB keeps
// reads of the 47 MB training set cheap.
// gzread takes an unsigned and returns an int, so reads are chunked.
constexpr int64_t kReadChunkBytes = int64_t{1} << 24;
// Cap on the reservation: a corrupt header may declare far more data than
// the file holds, and that should surface as DataLoss, not as an allocation
// failure.
constexpr int64_t kMaxReserveBytes = int64_t{1} << 26;
// Data read before anything is reserved, so a tiny corrupt file declaring
// gigabytes costs this much rather than kMaxReserveBytes plus a zeroed
// kReadChunkBytes chunk (which made tests/fuzz/idx_reader_fuzzer crawl).
constexpr int64_t kFirstChunkBytes = int64_t{1} << 16;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFilePtr = std::unique_ptr<gzFile_s, GzCloser>;

struct IdxHeader {
  std::vector<int64_t> dims;
  int64_t header_bytes = 0;
  int64_t item_bytes = 0;
};

absl::StatusOr<GzFilePtr> OpenIdx(const std::string& path) {
  absl::StatusOr<gzFile> f = OpenGzFile(path, "rb");
  if (!f.ok()) return f.status();
  return GzFilePtr(*f);
}

// Converts zlib's error state after a failed call.  I/O failures keep their
// errno-derived code; anything else means the compressed stream is corrupt.
absl::Status GzErrorStatus(gzFile f, const std::string& path,
                           absl::string_view what) {
  const int saved_errno = errno;
  int errnum = Z_OK;
  // zlib prefixes its messages with the path, which we add ourselves.
  absl::string_view msg = gzerror(f, &errnum);
  absl::ConsumePrefix(&msg, absl::StrCat(path, ": "));
  if (errnum == Z_ERRNO && saved_errno != 0) {
    return absl::ErrnoToStatus(saved_errno, absl::StrCat(path, ": ", what));
  }
  return absl::DataLossError(absl::StrCat(path, ": ", what, ": ", msg));
}

// Reads up to `len` bytes, stopping early only at end of input.  A gzip
// stream that ends mid-way is reported by zlib as Z_BUF_ERROR; that is
// treated as end of input so the caller can report the truncation in terms
// of the IDX layout.
absl::StatusOr<int64_t> ReadUpTo(gzFile f, const std::string& path,
                                 uint8_t* buf, int64_t len) {
  int64_t got = 0;
  while (got < len) {
    const unsigned chunk =
        static_cast<unsigned>(std::min(len - got, kReadChunkBytes));
    const int n = gzread(f, buf + got, chunk);
    if (n < 0) {
      int errnum = Z_OK;
      gzerror(f, &errnum);
      if (errnum == Z_BUF_ERROR) break;
      return GzErrorStatus(f, path, "read error");
    }
    if (n == 0) break;
    got += n;
  }
  return got;
}

absl::StatusOr<IdxHeader> ReadHeader(gzFile f, const std::string& path) {
  uint8_t magic[4];
  absl::StatusOr<int64_t> got = ReadUpTo(f, path, magic, sizeof(magic));
  if (!got.ok()) return got.status();
  if (*got < static_cast<int64_t>(sizeof(magic))) {
    return absl::DataLossError(absl::StrFormat(
        "%s: truncated header: expected 4 magic bytes, got %d", path, *got));
  }
  if (magic[0] != 0 || magic[1] != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: bad magic: first two bytes are 0x%02x 0x%02x, expected 0x00 0x00",
        path, magic[0], magic[1]));
  }
  const int ndims = magic[3];
  if (ndims == 0 || ndims > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: bad header: %d dimensions, expected 1 to %d", path,
                        ndims, kMaxDims));
  }
  if (magic[2] != kUnsignedByteType) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: unsupported IDX data type 0x%02x; only unsigned byte (0x08) is "
        "supported",
        path, magic[2]));
  }

  uint8_t raw[4 * kMaxDims];
  const int64_t dims_bytes = 4 * ndims;
  got = ReadUpTo(f, path, raw, dims_bytes);
  if (!got.ok()) return got.status();
  if (*got < dims_bytes) {
    return absl::DataLossError(absl::StrFormat(
        "%s: truncated header: declares %d dimensions (%d bytes), got %d "
        "bytes",
        path, ndims, dims_bytes, *got));
  }

  IdxHeader header;
  header.header_bytes = 4 + dims_bytes;
  header.item_bytes = 1;
  // The whole file's size must fit in a signed 64-bit offset for seeking.
  const int64_t max_data = std::numeric_limits<int64_t>::max() - 64;
  for (int i = 0; i < ndims; ++i) {
    const uint8_t* p = raw + 4 * i;
    const int64_t dim = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) |
                        (int64_t{p[2]} << 8) | int64_t{p[3]};
    header.dims.push_back(dim);
  }
  int64_t total = 1;
  for (int i = ndims - 1; i >= 0; --i) {
    const int64_t dim = header.dims[i];
    if (dim != 0 && total > max_data / dim) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: bad header: data size of dims overflows 64 bits", path));
    }
    total *= dim;
    if (i == 1) header.item_bytes = total;
  }
  return header;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ReadIdxDims(const std::string& path) {
  absl::StatusOr<GzFilePtr> file = OpenIdx(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<IdxHeader> header = ReadHeader(file->get(), path);
  if (!header.ok()) return header.status();
  return std::move(header->dims);
}

absl::StatusOr<int64_t> CountIdxItems(const std::string& path) {
  absl::StatusOr<GzFilePtr> file = OpenIdx(path);
  if (!file.ok()) return file.status();
  gzFile f = file->get();
  absl::StatusOr<IdxHeader> header = ReadHeader(f, path);
  if (!header.ok()) return header.status();
  const int64_t count = header->dims[0];
  const int64_t want = count * header->item_bytes;
  // Read through the data without keeping it (zlib's buffers and one
  // chunk), stopping as soon as every declared item is there: a header
  // that claims more than the file holds is caught before anyone plans
  // or allocates by it.
  std::vector<uint8_t> chunk(static_cast<size_t>(
      std::min<int64_t>(std::max<int64_t>(want, 1), kReadChunkBytes)));
  int64_t have = 0;
  while (have < want) {
    const int64_t n =
        std::min<int64_t>(want - have, static_cast<int64_t>(chunk.size()));
    absl::StatusOr<int64_t> got = ReadUpTo(f, path, chunk.data(), n);
    if (!got.ok()) return got.status();
    have += *got;
    if (*got < n) break;
  }
  if (have < want) {
    return absl::DataLossError(absl::StrFormat(
        "%s: truncated or lying header: it declares %d items (%d bytes of "
        "data), the file holds %d bytes of data",
        path, count, want, have));
  }
  return count;
}

absl::StatusOr<IdxArray> ReadIdx(const std::string& path, int64_t first_item,
                                 int64_t num_items) {
  absl::StatusOr<GzFilePtr> file = OpenIdx(path);
  if (!file.ok()) return file.status();
  gzFile f = file->get();
  absl::StatusOr<IdxHeader> header = ReadHeader(f, path);
  if (!header.ok()) return header.status();

  const int64_t count = header->dims[0];
  if (first_item < 0 || first_item > count || num_items < -1 ||
      (num_items != -1 && num_items > count - first_item)) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s: slice first_item=%d num_items=%d is out of range for %d items",
        path, first_item, num_items, count));
  }
  if (num_items == -1) num_items = count - first_item;

  // The header check bounds every offset below by the file's declared size.
  const int64_t skip = first_item * header->item_bytes;
  if (skip > 0) {
    // Seeking in a gzip stream decompresses and discards, so memory stays
    // bounded by zlib's buffers.  A skip past the end of the data is not an
    // error here; it shows up as a short read below.
    const z_off_t target = static_cast<z_off_t>(header->header_bytes + skip);
    if (gzseek(f, target, SEEK_SET) != target) {
      return GzErrorStatus(f, path,
                           absl::StrCat("cannot skip to item ", first_item));
    }
  }

  const int64_t want = num_items * header->item_bytes;
  IdxArray out;
  out.dims = header->dims;
  out.dims[0] = num_items;
  // Grow as data arrives rather than allocating `want` up front; see
  // kMaxReserveBytes and kFirstChunkBytes.
  while (static_cast<int64_t>(out.data.size()) < want) {
    const int64_t have = static_cast<int64_t>(out.data.size());
    if (have == kFirstChunkBytes) {
      out.data.reserve(static_cast<size_t>(std::min(want, kMaxReserveBytes)));
    }
    const int64_t chunk =
        std::min(want - have, have == 0 ? kFirstChunkBytes : kReadChunkBytes);
    out.data.resize(static_cast<size_t>(have + chunk));
    absl::StatusOr<int64_t> got =
        ReadUpTo(f, path, out.data.data() + have, chunk);
    if (!got.ok()) return got.status();
    out.data.resize(static_cast<size_t>(have + *got));
    if (*got < chunk) break;
  }
  if (static_cast<int64_t>(out.data.size()) < want) {
    return absl::DataLossError(absl::StrFormat(
        "%s: truncated: expected %d bytes of data for %d items, got %d", path,
        want, num_items, out.data.size()));
  }
  if (first_item + num_items == count) {
    // zlib verifies the gzip checksum only once it reads past the data, so
    // peek one byte to catch corrupt streams.  Bytes after the data, or a
    // trailer cut short, are tolerated: the data itself is complete.
    uint8_t extra;
    absl::StatusOr<int64_t> got = ReadUpTo(f, path, &extra, 1);
    if (!got.ok()) return got.status();
  }
  return out;
}

}  // namespace tessera
