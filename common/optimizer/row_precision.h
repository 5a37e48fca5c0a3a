// How an embedding table's rows are stored (RowPrecision in
// proto/job.proto) and the conversions between that and the fp32 the
// optimizer computes in.
//
// fp16 is IEEE binary16 (Eigen::half), bf16 the upper half of a float
// (Eigen::bfloat16). Widening is exact. Narrowing an updated row rounds
// stochastically: a value between the two representable neighbours lo < x
// < hi becomes hi with probability (x - lo) / (hi - lo), so the stored
// value is unbiased (E[stored] = x) and many small updates are not lost to
// round-to-nearest (Gupta et al. 2015; FBGEMM's fp16 tables). The draw for
// element e of a row is RowRoundingBits(RowRoundingKey(seed), e) with a
// seed from RowRoundingSeed(table, step, row): a pure function of the
// table, its step and the element, so a sync job rounds the same bits on
// every run, after any failure and on any sharding. Values beyond fp16's
// largest finite magnitude (65504) saturate there; NaN stays NaN; bf16 keeps
// float's range.
#ifndef TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_H_
#define TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/counter_rng.h"
#include "proto/job.pb.h"

namespace tessera {

class Optimizer;

// Bytes one stored value takes: 4 for ROW_FP32, 2 for ROW_FP16 and ROW_BF16.
int RowPrecisionBytes(RowPrecision precision);

// "fp32", "fp16", "bf16".
std::string RowPrecisionName(RowPrecision precision);

// The inverse of RowPrecisionName; InvalidArgument naming `name` and the
// accepted names otherwise.
absl::StatusOr<RowPrecision> ParseRowPrecision(absl::string_view name);

// The seed of the rounding of row `row` (its id in the whole variable) of
// table `table_seed` (RowTableSeed) at the table's update `step`.
uint64_t RowRoundingSeed(uint64_t table_seed, int64_t step, int64_t row);

// A table's rounding seed: of its variable's name and initializer seed, so
// every shard of it, on any server, draws from one stream.
uint64_t RowTableSeed(absl::string_view variable, uint64_t initializer_seed);

// dst[0, n) = src[0, n) widened to fp32 (`src` holds n stored values).
void WidenRow(RowPrecision precision, const void* src, float* dst, int64_t n);

// dst (n stored values) = src[0, n) rounded stochastically with `seed`
// (RowRoundingSeed). ROW_FP32 copies.
void NarrowRowStochastic(RowPrecision precision, const float* src, void* dst,
                         int64_t n, uint64_t seed);

// The same rounded to nearest even: initial values and restores, which
// must be a pure function of the value (exact for values that came from
// this precision, so a checkpoint round trip keeps every bit).
void NarrowRowNearest(RowPrecision precision, const float* src, void* dst,
                      int64_t n);

// What a parameter server holds per row of a table (the layout of
// ps_server/hash_table.h and shard.h), for the dry run's and the status'
// memory figures and the benches.
struct TableRowBytes {
  int64_t values = 0;  // dim stored values, padded to 4 bytes
  int64_t slots = 0;   // the optimizer's slot floats of one row
  int64_t header = 0;  // growing tables: the id, and padding to 8 bytes
  int64_t index = 0;   // growing tables: 4-byte entries at 3/4 load
  int64_t total() const { return values + slots + header + index; }
};
// `growing`: a hash table's record (8-byte id) and index entry; a fixed
// shard holds values and slots only.
TableRowBytes RowBytesOf(RowPrecision precision, int64_t dim,
                         const Optimizer& optimizer, bool growing);

// The draws: a row's key, once per row from its 64-bit seed, then 32 bits
// per element from the 32-bit counter hash, which vector code makes eight
// at a time for about what the rounding itself costs. fp16 takes a
// draw's top 24 bits as u in [0, 1) (RowRoundingUniform), bf16 its top 16.
inline uint32_t RowRoundingKey(uint64_t seed) {
  return static_cast<uint32_t>(CounterHash(seed, 0) >> 32);
}
inline uint32_t RowRoundingBits(uint32_t key, int64_t element) {
  return CounterHash32(key, static_cast<uint32_t>(element));
}
inline float RowRoundingUniform(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// One value rounded stochastically with uniform draw u in [0, 1): the rule
// NarrowRowStochastic applies per element, for tests.
uint16_t RoundHalfStochastic(float x, float u);
uint16_t RoundBfloat16Stochastic(float x, uint32_t random16);

// Element i of a row whose key is `key`, rounded as every path rounds it:
// fp16 with its draw's top 24 bits as u, bf16 with its top 16.
inline uint16_t RoundHalfAt(float x, uint32_t key, int64_t i) {
  return RoundHalfStochastic(x, RowRoundingUniform(RowRoundingBits(key, i)));
}
inline uint16_t RoundBfloat16At(float x, uint32_t key, int64_t i) {
  return RoundBfloat16Stochastic(x, RowRoundingBits(key, i) >> 16);
}

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_ROW_PRECISION_H_
