// Reader for the IDX file format used by MNIST and Fashion-MNIST
// (http://yann.lecun.com/exdb/mnist/): two zero bytes, a data-type byte, a
// dimension-count byte, one big-endian uint32 per dimension, then the data in
// row-major order.  Files may be gzip-compressed or plain; both are read
// through zlib, which passes plain files through unchanged.
//
// Contract:
//  - Only unsigned-byte data (type 0x08) is supported; any other type code is
//    reported as Unimplemented, naming the code.
//  - Every error message starts with the path.  A missing file is NotFound; a
//    malformed header (bad magic, 0 or more than 4 dimensions) is
//    InvalidArgument; a header or data section shorter than the header
//    declares is DataLoss; a requested slice outside the file is OutOfRange.
//  - Dimension 0 counts items.  Reading a slice of items skips the leading
//    items by streaming past them, so memory use is bounded by the slice, not
//    the file.
//  - Data after the requested slice is never read, so truncation beyond the
//    slice goes unnoticed.  When the slice reaches the last item, the gzip
//    checksum is verified too (DataLoss if it fails); bytes after the
//    declared data are ignored.

#ifndef TESSERA_DATA_IDX_IDX_READER_H_
#define TESSERA_DATA_IDX_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

struct IdxArray {
  // dims[0] is the number of items in this array (after slicing); the rest
  // are the per-item shape as declared in the file.
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Reads items [first_item, first_item + num_items) of the IDX file at `path`.
// num_items == -1 reads to the end of the file.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path,
                                 int64_t first_item = 0,
                                 int64_t num_items = -1);

// Returns the dims declared by the header of the IDX file at `path`, without
// reading any data.  Validates the header exactly as ReadIdx does.  Useful to
// compare item counts of files before reading slices of them.
absl::StatusOr<std::vector<int64_t>> ReadIdxDims(const std::string& path);

// The number of items of the IDX file at `path`, after checking that the
// file holds every item its header declares (it reads through the data
// without keeping it). DataLoss naming both sizes when the header claims
// more than the file holds, so a lying header (a count of 0xFFFFFFFF) is
// refused before anything is planned or allocated by it.
absl::StatusOr<int64_t> CountIdxItems(const std::string& path);

}  // namespace tessera

#endif  // TESSERA_DATA_IDX_IDX_READER_H_
