// Categorical ids written in hexadecimal, as Criteo's logs hold them (8
// digits) and tessera_ctr_gen writes them (16 digits): the one parser the
// Criteo reader and the CSV parser's "hex" columns share, and the writer
// the generator uses.
#ifndef TESSERA_DATA_CRITEO_HEX_ID_H_
#define TESSERA_DATA_CRITEO_HEX_ID_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace tessera {

// The most digits of an id: 64 bits.
inline constexpr int kMaxHexIdDigits = 16;

// Parses 1 to 16 hex digits (either case) into `*out`; false for an empty
// or longer text or any other character, leaving `*out` unchanged.
inline bool ParseHexId(absl::string_view text, uint64_t* out) {
  if (text.empty() || text.size() > kMaxHexIdDigits) return false;
  uint64_t value = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  *out = value;
  return true;
}

// Appends `id` as 16 lower-case hex digits.
inline void AppendHexId(uint64_t id, std::string* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char text[kMaxHexIdDigits];
  for (int k = kMaxHexIdDigits - 1; k >= 0; --k) {
    text[kMaxHexIdDigits - 1 - k] = kDigits[(id >> (4 * k)) & 15];
  }
  out->append(text, kMaxHexIdDigits);
}

}  // namespace tessera

#endif  // TESSERA_DATA_CRITEO_HEX_ID_H_
