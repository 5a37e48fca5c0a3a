#include "tools/export/onnx_file_sniff.h"

#include <cstdint>
#include <fstream>

namespace tessera {
namespace {

bool ReadVarint(std::ifstream& in, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const int c = in.get();
    if (c == EOF) return false;
    *value |= static_cast<uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

bool LooksLikeOnnxModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  in.seekg(0);
  constexpr uint64_t kVarint = 0, kLengthDelimited = 2;
  constexpr uint64_t kIrVersion = 1, kGraph = 7;
  // ModelProto's fields before the graph are a handful of scalars and
  // strings; a few dozen is plenty.
  for (int field = 0; field < 32; ++field) {
    uint64_t tag = 0, value = 0;
    if (!ReadVarint(in, &tag) || !ReadVarint(in, &value)) return false;
    const uint64_t number = tag >> 3, wire_type = tag & 7;
    if (field == 0) {
      // ONNX's IR versions so far are 1 to 10 or so.
      if (number != kIrVersion || wire_type != kVarint || value == 0 ||
          value > 100) {
        return false;
      }
      continue;
    }
    if (wire_type == kVarint) continue;
    if (wire_type != kLengthDelimited) return false;
    const int64_t end =
        static_cast<int64_t>(in.tellg()) + static_cast<int64_t>(value);
    if (value > static_cast<uint64_t>(size) || end > size) return false;
    if (number == kGraph) return true;
    in.seekg(end);
  }
  return false;
}

}  // namespace tessera
