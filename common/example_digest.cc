#include "common/example_digest.h"

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "common/byte_codec.h"
#include "common/counter_rng.h"

namespace tessera {
namespace {

// SplitMix64's finalizer (CounterHash, seed 0): neighbouring identities
// give unrelated hashes, so no two small sets of indices sum alike by
// accident.
uint64_t Mix(uint64_t identity) { return CounterHash(0, identity); }

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
  // Ids that do not decode were refused by the worker before the step ran.
  absl::StatusOr<std::vector<int64_t>> ids =
      DecodeRaw<int64_t>(step.example_ids(), "example_ids");
  uint64_t digest = 0;
  if (!ids.ok()) return digest;
  for (int64_t id : *ids) digest += Mix(static_cast<uint64_t>(id));
  return digest;
}

std::string DigestText(uint64_t digest) {
  return absl::StrFormat("%016x", digest);
}

}  // namespace tessera
