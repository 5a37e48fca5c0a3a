// How a bytes feature value (a TFRecord bytes_list entry, a CSV "string"
// column) becomes a sparse id. The function is fixed here for good: ids
// name embedding rows in checkpoints, so a trained model keeps working only
// while the same string gives the same id in every process and release
// (absl::Hash is seeded per process and so cannot serve).
//
// id = SplitMix64-finalizer(FNV-1a-64(bytes)) as int64: FNV-1a is a
// published, endian-free byte hash; the finalizer spreads its low bits,
// which a table's `id mod vocab_size` and the hashed tables' shards use.

#ifndef TESSERA_DATA_RECORDS_FEATURE_HASH_H_
#define TESSERA_DATA_RECORDS_FEATURE_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace tessera {

inline int64_t HashFeatureBytes(absl::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64-bit offset basis
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;  // FNV-1a 64-bit prime
  }
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return static_cast<int64_t>(h ^ (h >> 31));
}

}  // namespace tessera

#endif  // TESSERA_DATA_RECORDS_FEATURE_HASH_H_
