// HashShardOf is the project's one rule for routing an id of a growing
// (hash) embedding table to the shard that owns it; ShardLayout::Locate is
// the rule for fixed-vocabulary tables. Workers route with it, and each
// hash-table shard checks with it that the ids it receives are its own, so a
// second copy of the formula anywhere is a bug.
//
// Ids of hash tables are arbitrary int64 values (hashed categorical
// features), often clustered or sequential, so the id is first scrambled
// with MurmurHash3's 64-bit finalizer (fmix64: every input bit affects
// every output bit with probability close to 1/2), then mapped to
// [0, num_shards) with Lemire's multiply-shift reduction, which uses the
// high bits of the product and needs no division. The mapping is fixed
// forever: changing it would move every row of every saved table.
//
// Thread safety: pure functions.

#ifndef TESSERA_PARTITIONERS_HASH_ROUTING_H_
#define TESSERA_PARTITIONERS_HASH_ROUTING_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace tessera {

// MurmurHash3's fmix64 of `id`, a bijection on 64-bit values.
inline uint64_t HashRoutingMix(int64_t id) {
  uint64_t k = static_cast<uint64_t>(id);
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  k *= 0xC4CEB9FE1A85EC53ull;
  k ^= k >> 33;
  return k;
}

// The shard, in [0, num_shards), that owns `id` of a hash table split over
// `num_shards` shards. REQUIRES: num_shards >= 1 (see CheckedHashShardOf).
inline int HashShardOf(int64_t id, int num_shards) {
  const unsigned __int128 product =
      static_cast<unsigned __int128>(HashRoutingMix(id)) *
      static_cast<uint64_t>(num_shards);
  return static_cast<int>(static_cast<uint64_t>(product >> 64));
}

// HashShardOf, or InvalidArgument naming num_shards when it is below 1.
absl::StatusOr<int> CheckedHashShardOf(int64_t id, int num_shards);

}  // namespace tessera

#endif  // TESSERA_PARTITIONERS_HASH_ROUTING_H_
