#include "partitioners/hash_routing.h"

#include "absl/strings/str_cat.h"

namespace tessera {

absl::StatusOr<int> CheckedHashShardOf(int64_t id, int num_shards) {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("hash routing of id ", id,
                     ": num_shards must be >= 1, got ", num_shards));
  }
  return HashShardOf(id, num_shards);
}

}  // namespace tessera
