#include "common/crc32c.h"

#include <boost/crc.hpp>

namespace tessera {
namespace crc32c {
namespace {

// Reflected CRC-32C with the usual all-ones initial value and final xor.
using Crc32c =
    boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

// Boost's constructor takes the register in unreflected bit order.
uint32_t Reverse(uint32_t x) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i, x >>= 1) r = (r << 1) | (x & 1u);
  return r;
}

}  // namespace

uint32_t Value(const char* data, size_t n) { return Extend(0, data, n); }

uint32_t Extend(uint32_t init_crc, const char* data, size_t n) {
  // Undo the final xor and the output reflection to get the register back.
  Crc32c crc(Reverse(init_crc ^ 0xFFFFFFFFu));
  crc.process_bytes(data, n);
  return crc.checksum();
}

}  // namespace crc32c
}  // namespace tessera
