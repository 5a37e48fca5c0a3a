// Exactly once, by identity: which examples an epoch trained, as one
// number. Counting examples cannot tell a resume that trains one example
// twice and misses another from a correct one; a sum of the examples'
// hashes can. Each example's identity (its index in the training set, or
// its stream shard and position) is mixed into 64 bits, and a set's digest
// is the sum of those modulo 2^64: independent of order, so workers and
// steps may finish in any order, while an example counted twice or missed
// changes it.

#ifndef TESSERA_COMMON_EXAMPLE_DIGEST_H_
#define TESSERA_COMMON_EXAMPLE_DIGEST_H_

#include <cstdint>
#include <string>

#include "proto/worker_service.pb.h"

namespace tessera {

// The digest of the examples of training-set indices [begin, end).
uint64_t DigestOfIndices(int64_t begin, int64_t end);

// The digest of positions [first, first + count) of stream shard `shard`
// (any pass: an epoch is one pass of every shard).
uint64_t DigestOfStreamRun(int32_t shard, int64_t first, int64_t count);

// The digest of the examples `step` names: its example ids, or its run of a
// stream; 0 for a step without examples.
uint64_t DigestOfStep(const StepRequest& step);

// For messages and metrics.jsonl: 16 hexadecimal digits.
std::string DigestText(uint64_t digest);

}  // namespace tessera

#endif  // TESSERA_COMMON_EXAMPLE_DIGEST_H_
