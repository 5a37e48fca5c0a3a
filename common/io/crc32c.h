#ifndef TESSERA_COMMON_CRC32C_H_
#define TESSERA_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace tessera {
namespace crc32c {

// CRC-32C (Castagnoli), as TFRecord files, LevelDB and Tessera's
// checkpoints use it. Computed by the CPU's crc32 instruction where
// there is one (x86-64 with SSE 4.2), else by Boost.CRC; this header keeps
// the polynomial and the masking in one place.

// The CRC of data[0, n).
uint32_t Value(const char* data, size_t n);

// The CRC of A followed by data[0, n), where init_crc is the CRC of A.
uint32_t Extend(uint32_t init_crc, const char* data, size_t n);

// A CRC stored next to the data it covers is masked, so that computing the
// CRC of a string that contains embedded CRCs stays well behaved (the
// rotation and constant are TFRecord's and LevelDB's).
inline uint32_t Mask(uint32_t crc) {
  constexpr uint32_t kMaskDelta = 0xa282ead8u;
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

inline uint32_t Unmask(uint32_t masked) {
  constexpr uint32_t kMaskDelta = 0xa282ead8u;
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace crc32c
}  // namespace tessera

#endif  // TESSERA_COMMON_CRC32C_H_
