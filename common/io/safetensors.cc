#include "common/io/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/io/atomic_file.h"
#include "common/io/bounded_file_read.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

using Json = nlohmann::json;

// The format's own reader refuses larger headers (100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

absl::Status Invalid(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

// The element count of `shape` in `count`; false for a negative dimension
// or a count whose bytes would overflow.
bool ElementCount(const std::vector<int64_t>& shape, uint64_t* count) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / 8 /
                          static_cast<uint64_t>(d)) {
      return false;
    }
    n *= static_cast<uint64_t>(d);
  }
  *count = n;
  return true;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float value;
  if (exp == 0) {
    value = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    value = mant == 0 ? std::numeric_limits<float>::infinity()
                      : std::numeric_limits<float>::quiet_NaN();
  } else {
    value = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  }
  return sign ? -value : value;
}

absl::Status ParseMetadata(const Json& entry, absl::string_view what,
                           Safetensors* file) {
  if (!entry.is_object()) {
    return Invalid(what, "__metadata__ is not an object");
  }
  for (auto m = entry.begin(); m != entry.end(); ++m) {
    if (!m.value().is_string()) {
      return Invalid(
          what, absl::StrCat("__metadata__ \"", m.key(), "\" is not a string"));
    }
    file->metadata[m.key()] = m.value().get<std::string>();
  }
  return absl::OkStatus();
}

// One tensor's entry of the header, its bytes taken from `data`; its
// byte range in *range.
absl::Status ParseTensor(const std::string& name, const Json& entry,
                         absl::string_view data, absl::string_view what,
                         SafetensorsTensor* tensor,
                         std::pair<uint64_t, uint64_t>* range) {
  const std::string where = absl::StrCat("tensor \"", name, "\"");
  if (!entry.is_object() || !entry.contains("dtype") ||
      !entry.contains("shape") || !entry.contains("data_offsets")) {
    return Invalid(what, absl::StrCat(where,
                                      " lacks dtype, shape or "
                                      "data_offsets"));
  }
  SafetensorsTensor& t = *tensor;
  t.name = name;
  if (!entry["dtype"].is_string()) {
    return Invalid(what, absl::StrCat(where, ": dtype is not a string"));
  }
  t.dtype = entry["dtype"].get<std::string>();
  const int size = SafetensorsDtypeSize(t.dtype);
  if (size == 0) {
    return Invalid(what,
                   absl::StrCat(where, ": unknown dtype \"", t.dtype, "\""));
  }
  const Json& shape = entry["shape"];
  if (!shape.is_array()) {
    return Invalid(what, absl::StrCat(where, ": shape is not an array"));
  }
  for (const Json& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Invalid(what, absl::StrCat(where, ": shape ", shape.dump(),
                                        " is not of sizes >= 0"));
    }
    t.shape.push_back(d.get<int64_t>());
  }
  const Json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 ||
      !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
    return Invalid(what, absl::StrCat(where, ": data_offsets ", offsets.dump(),
                                      " is not [begin, end]"));
  }
  const uint64_t begin = offsets[0].get<uint64_t>();
  const uint64_t end = offsets[1].get<uint64_t>();
  uint64_t count = 0;
  if (!ElementCount(t.shape, &count)) {
    return Invalid(
        what, absl::StrCat(where, ": shape ", shape.dump(), " is too large"));
  }
  if (begin > end || end > data.size()) {
    return Invalid(what, absl::StrCat(where, ": data_offsets [", begin, ", ",
                                      end, "] lie outside the ", data.size(),
                                      " bytes of data (truncated file?)"));
  }
  if (end - begin != count * size) {
    return Invalid(what, absl::StrCat(where, ": ", end - begin,
                                      " bytes for shape ", shape.dump(), " of ",
                                      t.dtype, ", which needs ", count * size));
  }
  t.data = std::string(data.substr(begin, end - begin));
  *range = {begin, end};
  return absl::OkStatus();
}

// The format's rule: the tensors' bytes tile the data exactly. Sorts
// the tensors by where their bytes lie.
absl::Status SortTiled(absl::string_view what, uint64_t data_bytes,
                       const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
                       Safetensors* file) {
  std::vector<size_t> order(file->tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  uint64_t at = 0;
  for (size_t i : order) {
    if (ranges[i].first != at) {
      return Invalid(what, absl::StrCat("tensor \"", file->tensors[i].name,
                                        "\" starts at byte ", ranges[i].first,
                                        " of the data, not at ", at,
                                        " (a gap or an overlap)"));
    }
    at = ranges[i].second;
  }
  if (at != data_bytes) {
    return Invalid(what, absl::StrCat("the tensors cover ", at, " of the ",
                                      data_bytes, " bytes of data"));
  }
  std::vector<SafetensorsTensor> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(std::move(file->tensors[i]));
  file->tensors = std::move(sorted);
  return absl::OkStatus();
}

}  // namespace

const SafetensorsTensor* Safetensors::Find(absl::string_view name) const {
  for (const SafetensorsTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int SafetensorsDtypeSize(absl::string_view dtype) {
  static const std::pair<const char*, int> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  for (const auto& [name, size] : kSizes) {
    if (dtype == name) return size;
  }
  return 0;
}

absl::StatusOr<Safetensors> ParseSafetensors(absl::string_view bytes,
                                             absl::string_view what) {
  if (bytes.size() < 8) {
    return Invalid(what, absl::StrCat("not a safetensors file: ", bytes.size(),
                                      " bytes, fewer than the 8-byte header "
                                      "length"));
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) {
    header_bytes = (header_bytes << 8) | static_cast<uint8_t>(bytes[i]);
  }
  if (header_bytes > kMaxHeaderBytes || header_bytes > bytes.size() - 8) {
    return Invalid(what, absl::StrCat("not a safetensors file or truncated: "
                                      "its header is said to be ",
                                      header_bytes, " bytes, the file holds ",
                                      bytes.size() - 8, " after the length"));
  }
  Json header = Json::parse(bytes.substr(8, header_bytes), nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return Invalid(what, "the header is not a JSON object");
  }
  const absl::string_view data = bytes.substr(8 + header_bytes);
  Safetensors file;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const Json& entry = it.value();
    if (name == "__metadata__") {
      if (absl::Status s = ParseMetadata(entry, what, &file); !s.ok()) {
        return s;
      }
      continue;
    }
    SafetensorsTensor t;
    std::pair<uint64_t, uint64_t> range;
    if (absl::Status s = ParseTensor(name, entry, data, what, &t, &range);
        !s.ok()) {
      return s;
    }
    ranges.push_back(range);
    file.tensors.push_back(std::move(t));
  }
  if (absl::Status s = SortTiled(what, data.size(), ranges, &file); !s.ok()) {
    return s;
  }
  return file;
}

absl::StatusOr<Safetensors> ReadSafetensorsFile(const std::string& path) {
  absl::StatusOr<std::string> bytes =
      ReadBoundedFile(path, kMaxSafetensorsBytes, path);
  if (!bytes.ok()) return bytes.status();
  return ParseSafetensors(*bytes, path);
}

absl::StatusOr<std::string> SerializeSafetensors(const Safetensors& file) {
  Json header = Json::object();
  if (!file.metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : file.metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const SafetensorsTensor& t : file.tensors) {
    if (t.name.empty() || t.name == "__metadata__" ||
        !names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "safetensors: tensor name \"", t.name, "\" is empty or repeated"));
    }
    const int size = SafetensorsDtypeSize(t.dtype);
    uint64_t count = 0;
    if (size == 0 || !ElementCount(t.shape, &count) ||
        count * size != t.data.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: tensor \"", t.name, "\" of dtype ",
                       t.dtype, " and shape [", absl::StrJoin(t.shape, ", "),
                       "] has ", t.data.size(), " bytes"));
    }
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  // Padded as the format's writer pads, so the data starts 8-aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  out += text;
  for (const SafetensorsTensor& t : file.tensors) out += t.data;
  return out;
}

absl::Status WriteSafetensorsFile(const Safetensors& file,
                                  const std::string& path) {
  absl::StatusOr<std::string> bytes = SerializeSafetensors(file);
  if (!bytes.ok()) return bytes.status();
  absl::Status s = WriteFileAtomically(path, *bytes);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
}

absl::StatusOr<std::vector<float>> SafetensorsFloats(
    const SafetensorsTensor& t) {
  const int size = SafetensorsDtypeSize(t.dtype);
  if (size == 0 || t.data.size() % size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", t.name, "\": bad dtype ", t.dtype));
  }
  const size_t n = t.data.size() / size;
  std::vector<float> out(n);
  const char* p = t.data.data();
  if (t.dtype == "F32") {
    std::memcpy(out.data(), p, n * 4);
  } else if (t.dtype == "F64") {
    for (size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      if (t.dtype == "F16") {
        out[i] = HalfToFloat(h);
      } else {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", t.name, "\" is ", t.dtype,
                     ", not a floating-point dtype (F32, F64, F16, BF16)"));
  }
  return out;
}

SafetensorsTensor FloatTensor(std::string name, std::vector<int64_t> shape,
                              const std::vector<float>& values) {
  SafetensorsTensor t;
  t.name = std::move(name);
  t.dtype = "F32";
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(values.data()),
                values.size() * sizeof(float));
  return t;
}

SafetensorsTensor Int64Tensor(std::string name, std::vector<int64_t> shape,
                              const std::vector<int64_t>& values) {
  SafetensorsTensor t;
  t.name = std::move(name);
  t.dtype = "I64";
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(values.data()),
                values.size() * sizeof(int64_t));
  return t;
}

}  // namespace tessera
