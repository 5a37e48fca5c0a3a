// bench_embedding --mode=table_bytes: the bytes a parameter server holds
// per row of a table (values, optimizer slots, record header, index and
// blocks) for each row precision and optimizer, fp32 + Adagrad against
// fp16/bf16 + rowwise_adagrad, measured on real tables.
#ifndef TESSERA_BENCH_EMBEDDING_TABLE_BYTES_H_
#define TESSERA_BENCH_EMBEDDING_TABLE_BYTES_H_

#include <cstdint>
#include <vector>

namespace tessera {

// For each of `dims`: one growing hash-table shard of `rows` rows (created
// by pulls, in a forked child so each starts from a fresh heap) and one
// fixed shard of `rows` rows, in fp32 + adagrad, fp16 + rowwise_adagrad
// and bf16 + rowwise_adagrad. Prints one line per table kind: the bytes
// per row by the table's own accounting, split into values, slots, header
// (the id and padding to 8 bytes) and index and blocks, the VmRSS growth
// per row, and the ratio to fp32 + adagrad of the same kind and dim.
// Returns 0, or 1 when a child failed.
int RunTableBytes(const std::vector<int64_t>& dims, int64_t rows);

}  // namespace tessera

#endif  // TESSERA_BENCH_EMBEDDING_TABLE_BYTES_H_
