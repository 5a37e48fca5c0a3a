// Internal to the checkpoint file layer (common/checkpoint/checkpoint_file.h):
// the format's constants and the helpers its writer and reader share. Not for
// use elsewhere.
#ifndef TESSERA_COMMON_CHECKPOINT_FORMAT_H_
#define TESSERA_COMMON_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint/checkpoint_file.h"

namespace tessera {
namespace checkpoint_internal {

static_assert(ABSL_IS_LITTLE_ENDIAN,
              "checkpoint files are written in host byte order, which must "
              "be little-endian");

inline constexpr char kHeaderMagic[8] = {'T', 'S', 'R', 'A',
                                         'C', 'K', 'P', 'T'};
inline constexpr char kFooterMagic[8] = {'T', 'S', 'R', 'A',
                                         'E', 'N', 'D', '!'};
inline constexpr int64_t kHeaderBytes = 16;
inline constexpr int64_t kFooterBytes = 20;  // u64 count, u32 crc, 8-byte magic
// Names, keys and dims of at most 256 arrays fit easily in this.
inline constexpr uint32_t kMaxMetaBytes = 1 << 20;
inline constexpr size_t kBufferBytes = 1 << 20;
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
// Fuzz builds (tests/fuzz) compute CRCs but do not enforce them, so mutated
// input reaches the length and metadata checks behind them. Never defined
// in a real build.
inline constexpr bool kEnforceCrcs = false;
#else
inline constexpr bool kEnforceCrcs = true;
#endif

// The last two components of `path`, which name a checkpoint file within the
// checkpoint root ("ckpt-0000000120/ps-1.shards").
std::string LabelOf(absl::string_view path);

template <typename T>
void PutFixed(T value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T GetFixed(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

inline std::string EncodeFixed32(uint32_t value) {
  std::string out;
  PutFixed(value, &out);
  return out;
}

inline bool IsValidDtype(uint8_t code) { return code >= 1 && code <= 6; }

// Checks a name or key against the limits both sides share; "" if fine.
std::string NameProblem(absl::string_view what, absl::string_view name,
                        size_t max_bytes);

// Checks an entry's arrays; "" if fine, else what is wrong. Sets *total to
// the entry's data bytes.
std::string ArraysProblem(const std::vector<CheckpointArrayInfo>& arrays,
                          int64_t* total);

}  // namespace checkpoint_internal
}  // namespace tessera

#endif  // TESSERA_COMMON_CHECKPOINT_FORMAT_H_
