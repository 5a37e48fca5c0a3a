// Fuzzes the IDX reader (plain and gzip) through a memory file: the whole
// file, its dims, and a slice chosen by the first input byte.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "data/idx/idx_reader.h"
#include "tests/fuzz/memfd_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int slice = data[0];
  tessera::fuzz::MemFile file(data + 1, size - 1);
  absl::StatusOr<std::vector<int64_t>> dims = tessera::ReadIdxDims(file.path());
  absl::StatusOr<tessera::IdxArray> all = tessera::ReadIdx(file.path());
  if (all.ok()) {
    if (!dims.ok() || all->dims != *dims) std::abort();
    // The data must be the product of the dims; the size bounds every
    // partial product unless a later dim is 0.
    uint64_t bytes = 1;
    for (int64_t d : all->dims) {
      bytes = __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)
                  ? UINT64_MAX
                  : bytes;
    }
    const bool has_zero =
        std::find(all->dims.begin(), all->dims.end(), 0) != all->dims.end();
    if (all->data.size() != (has_zero ? 0 : bytes)) std::abort();
  }
  // A slice [first, first + num) from the first byte: low nibble first item,
  // high nibble count (15: to the end).
  const int64_t first = slice & 0xf;
  const int64_t num = (slice >> 4) == 0xf ? -1 : (slice >> 4);
  absl::StatusOr<tessera::IdxArray> part =
      tessera::ReadIdx(file.path(), first, num);
  if (part.ok() && all.ok()) {
    const size_t item_bytes =
        all->dims[0] == 0 ? 0 : all->data.size() / all->dims[0];
    const size_t offset = static_cast<size_t>(first) * item_bytes;
    if (offset + part->data.size() > all->data.size() ||
        !std::equal(part->data.begin(), part->data.end(),
                    all->data.begin() + offset)) {
      std::abort();
    }
  }
  return 0;
}
