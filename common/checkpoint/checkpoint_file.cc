#include "common/checkpoint/checkpoint_file.h"

#include <limits>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_format.h"

namespace tessera {
namespace checkpoint_internal {

std::string LabelOf(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t last = path.rfind('/');
  if (last == absl::string_view::npos || last == 0) return std::string(path);
  const size_t prev = path.rfind('/', last - 1);
  return std::string(prev == absl::string_view::npos ? path
                                                     : path.substr(prev + 1));
}

std::string NameProblem(absl::string_view what, absl::string_view name,
                        size_t max_bytes) {
  if (name.empty()) return absl::StrCat(what, " is empty");
  if (name.size() > max_bytes) {
    return absl::StrCat(what, " has ", name.size(), " bytes, more than ",
                        max_bytes);
  }
  return "";
}

std::string ArraysProblem(const std::vector<CheckpointArrayInfo>& arrays,
                          int64_t* total) {
  if (arrays.size() > kMaxCheckpointArrays) {
    return absl::StrCat(arrays.size(), " arrays, more than ",
                        kMaxCheckpointArrays);
  }
  absl::flat_hash_set<absl::string_view> keys;
  *total = 0;
  for (const CheckpointArrayInfo& a : arrays) {
    std::string problem =
        NameProblem("an array key", a.key, kMaxCheckpointKeyBytes);
    if (!problem.empty()) return problem;
    const std::string quoted =
        absl::StrCat("array '", absl::CHexEscape(a.key), "'");
    if (!keys.insert(a.key).second) return absl::StrCat(quoted, " repeats");
    if (!IsValidDtype(static_cast<uint8_t>(a.dtype))) {
      return absl::StrCat(quoted, " has unknown dtype ",
                          static_cast<int>(a.dtype));
    }
    if (a.dims.size() > kMaxCheckpointRank) {
      return absl::StrCat(quoted, " has rank ", a.dims.size(), ", more than ",
                          kMaxCheckpointRank);
    }
    int64_t bytes = static_cast<int64_t>(CheckpointDtypeSize(a.dtype));
    for (int64_t d : a.dims) {
      if (d < 0) return absl::StrCat(quoted, " has negative dimension ", d);
      if (d != 0 && bytes > std::numeric_limits<int64_t>::max() / d) {
        return absl::StrCat(quoted, " is larger than 2^63 bytes");
      }
      bytes *= d;
    }
    if (*total > std::numeric_limits<int64_t>::max() - bytes) {
      return "the arrays are larger than 2^63 bytes";
    }
    *total += bytes;
  }
  return "";
}

}  // namespace checkpoint_internal

namespace {

// Polynomial arithmetic for Crc32cCombine (zlib's crc32_combine method).
uint32_t Gf2MatrixTimes(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec != 0; vec >>= 1, ++mat) {
    if (vec & 1) sum ^= *mat;
  }
  return sum;
}

void Gf2MatrixSquare(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = Gf2MatrixTimes(mat, mat[n]);
}

}  // namespace

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  if (len_b == 0) return crc_a;
  uint32_t even[32];     // operator for 2^k zero bits, k even
  uint32_t odd[32];      // operator for 2^k zero bits, k odd
  odd[0] = 0x82F63B78u;  // reflected Castagnoli polynomial: one zero bit
  uint32_t row = 1;
  for (int n = 1; n < 32; ++n, row <<= 1) odd[n] = row;
  Gf2MatrixSquare(even, odd);  // two zero bits
  Gf2MatrixSquare(odd, even);  // four zero bits
  // Applies len_b zero bytes to crc_a, one squaring per bit of len_b.
  do {
    Gf2MatrixSquare(even, odd);
    if (len_b & 1) crc_a = Gf2MatrixTimes(even, crc_a);
    len_b >>= 1;
    if (len_b == 0) break;
    Gf2MatrixSquare(odd, even);
    if (len_b & 1) crc_a = Gf2MatrixTimes(odd, crc_a);
    len_b >>= 1;
  } while (len_b != 0);
  return crc_a ^ crc_b;
}

size_t CheckpointDtypeSize(CheckpointDtype dtype) {
  switch (dtype) {
    case CheckpointDtype::kFloat32:
    case CheckpointDtype::kInt32:
      return 4;
    case CheckpointDtype::kInt64:
      return 8;
    case CheckpointDtype::kUint8:
      return 1;
    case CheckpointDtype::kFloat16:
    case CheckpointDtype::kBFloat16:
      return 2;
  }
  return 0;
}

absl::string_view CheckpointDtypeName(CheckpointDtype dtype) {
  switch (dtype) {
    case CheckpointDtype::kFloat32:
      return "float32";
    case CheckpointDtype::kInt32:
      return "int32";
    case CheckpointDtype::kInt64:
      return "int64";
    case CheckpointDtype::kUint8:
      return "uint8";
    case CheckpointDtype::kFloat16:
      return "float16";
    case CheckpointDtype::kBFloat16:
      return "bfloat16";
  }
  return "unknown dtype";
}

int64_t CheckpointArrayInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t CheckpointArrayInfo::byte_size() const {
  return num_elements() * static_cast<int64_t>(CheckpointDtypeSize(dtype));
}

int CheckpointEntryInfo::FindArray(absl::string_view key) const {
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (arrays[i].key == key) return static_cast<int>(i);
  }
  return -1;
}

int64_t CheckpointEntryInfo::data_bytes() const {
  int64_t total = 0;
  for (const CheckpointArrayInfo& a : arrays) total += a.byte_size();
  return total;
}

absl::StatusOr<CheckpointFileSummary> VerifyCheckpointFile(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::Open(path);
  if (!reader.ok()) return reader.status();
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next();
    if (!more.ok()) return more.status();
    if (!*more) break;
  }
  return (*reader)->summary();
}

absl::StatusOr<std::vector<CheckpointEntry>> ReadCheckpointFile(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::vector<CheckpointEntry> entries;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next();
    if (!more.ok()) return more.status();
    if (!*more) break;
    CheckpointEntry entry;
    entry.info = (*reader)->entry();
    for (size_t i = 0; i < entry.info.arrays.size(); ++i) {
      std::string bytes(static_cast<size_t>(entry.info.arrays[i].byte_size()),
                        '\0');
      if (absl::Status s = (*reader)->ReadArray(
              static_cast<int>(i),
              absl::Span<char>(bytes.data(), bytes.size()));
          !s.ok()) {
        return s;
      }
      entry.data.push_back(std::move(bytes));
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}
}  // namespace tessera
