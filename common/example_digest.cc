#include "common/example_digest.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace tessera {
namespace {

// SplitMix64's finalizer: neighbouring identities give unrelated hashes,
// so no two small sets of indices sum alike by accident.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Stream identities live apart from indices: shard in the top bits.
uint64_t StreamIdentity(int32_t shard, int64_t position) {
  return (uint64_t{1} << 63) | (static_cast<uint64_t>(shard) << 40) |
         static_cast<uint64_t>(position);
}

}  // namespace

uint64_t DigestOfIndices(int64_t begin, int64_t end) {
  uint64_t digest = 0;
  for (int64_t i = begin; i < end; ++i) digest += Mix(static_cast<uint64_t>(i));
  return digest;
}

uint64_t DigestOfStreamRun(int32_t shard, int64_t first, int64_t count) {
  uint64_t digest = 0;
  for (int64_t p = first; p < first + count; ++p) {
    digest += Mix(StreamIdentity(shard, p));
  }
  return digest;
}

uint64_t DigestOfStep(const StepRequest& step) {
  if (step.has_stream()) {
    return DigestOfStreamRun(step.stream().shard(), step.stream().first(),
                             step.stream().count());
  }
  // Little-endian int64s (common/byte_codec.h); this code runs on
  // little-endian machines only, as the codec does.
  const std::string& bytes = step.example_ids();
  uint64_t digest = 0;
  for (size_t at = 0; at + sizeof(int64_t) <= bytes.size();
       at += sizeof(int64_t)) {
    int64_t id;
    std::memcpy(&id, bytes.data() + at, sizeof(id));
    digest += Mix(static_cast<uint64_t>(id));
  }
  return digest;
}

std::string DigestText(uint64_t digest) {
  return absl::StrFormat("%016x", digest);
}

}  // namespace tessera
