// The safetensors format (github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's dtype,
// shape and byte range, then the tensors' bytes. It is how PyTorch and
// Hugging Face users keep a state_dict without pickle, so it is how weights
// enter (tessera_coordinator --init_weights) and leave (tessera_export
// --format=safetensors) Tessera as a PyTorch module's.
//
// Contract:
//  - Parsing checks everything the format's own reader checks: the header
//    length within the file, the header a JSON object of tensors, known
//    dtypes, each tensor's byte range exactly its shape's size, the ranges
//    covering the data with no gap or overlap. Any violation is an
//    InvalidArgument naming the tensor or field; nothing is read out of
//    bounds.
//  - Tensors are kept as raw little-endian bytes (this host's order: the
//    project builds for x86-64 and aarch64, both little-endian).
//  - Thread-safe; no state.
#ifndef TESSERA_COMMON_IO_SAFETENSORS_H_
#define TESSERA_COMMON_IO_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// One tensor: its dtype as the format spells it ("F32", "I64", ...), its
// shape ([] for a scalar) and its bytes.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;
};

struct Safetensors {
  std::vector<SafetensorsTensor> tensors;       // in the order of their bytes
  std::map<std::string, std::string> metadata;  // "__metadata__"

  // The tensor named `name`, or null.
  const SafetensorsTensor* Find(absl::string_view name) const;
};

// The largest file ReadSafetensorsFile reads (a bound against a mistaken
// path; a model beyond it is not what one job's weights are).
constexpr size_t kMaxSafetensorsBytes = size_t{64} << 30;

// The bytes per element of `dtype`, or 0 for a dtype the format lacks.
int SafetensorsDtypeSize(absl::string_view dtype);

// Parses a whole file's bytes. `what` names the file in every error.
absl::StatusOr<Safetensors> ParseSafetensors(absl::string_view bytes,
                                             absl::string_view what);

// Reads and parses the file at `path`; errors name the path.
absl::StatusOr<Safetensors> ReadSafetensorsFile(const std::string& path);

// The file's bytes: the header padded with spaces to 8 bytes, as the
// format's writer does, then the tensors in the given order. InvalidArgument
// for an empty or repeated name, an unknown dtype or bytes that are not the
// shape's size.
absl::StatusOr<std::string> SerializeSafetensors(const Safetensors& file);

// Writes `file` to `path` whole (atomically); errors name the path.
absl::Status WriteSafetensorsFile(const Safetensors& file,
                                  const std::string& path);

// The tensor's values as floats: F32 as they are, F64, F16 and BF16
// converted. InvalidArgument naming the tensor for any other dtype.
absl::StatusOr<std::vector<float>> SafetensorsFloats(
    const SafetensorsTensor& tensor);

// A tensor of `values` (F32) or of `ids` (I64) with `shape`.
SafetensorsTensor FloatTensor(std::string name, std::vector<int64_t> shape,
                              const std::vector<float>& values);
SafetensorsTensor Int64Tensor(std::string name, std::vector<int64_t> shape,
                              const std::vector<int64_t>& values);

}  // namespace tessera

#endif  // TESSERA_COMMON_IO_SAFETENSORS_H_
