// Click-through data in memory: a label, dense features and, per
// categorical field, a bag of 64-bit ids per example (CSR), as the Criteo
// reader (data/criteo/criteo_reader.h) and the generator produce it, and
// the batches a worker gathers from it for one step.

#ifndef TESSERA_DATA_CRITEO_CTR_DATASET_H_
#define TESSERA_DATA_CRITEO_CTR_DATASET_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tessera {

// One categorical field of a whole data set. Example i's ids are
// ids[offsets[i] .. offsets[i + 1]); 32-bit offsets keep a data set of
// many single-hot fields compact (the loader rejects more than 2^32 ids in
// one field).
struct CtrFieldColumn {
  std::vector<uint32_t> offsets{0};  // size + 1 entries
  std::vector<int64_t> ids;          // 64-bit hashes, stored as int64
};

// About 4 + 4 * num_dense + num_fields * (4 + 8 * ids per bag) bytes per
// example: a million Criteo examples take about 370 MB.
struct CtrDataset {
  int num_dense = 0;
  int num_fields = 0;
  int64_t size = 0;
  // Index in the file of example 0 (the slice's first example).
  int64_t first = 0;
  // False for examples to predict that came without labels; labels is
  // then empty.
  bool has_labels = true;
  std::vector<float> labels;           // size, each 0 or 1
  std::vector<float> dense;            // [size, num_dense], row-major
  std::vector<CtrFieldColumn> fields;  // num_fields

  const float* dense_row(int64_t i) const {
    return dense.data() + i * num_dense;
  }
};

// One field of a batch: example b's ids are ids[offsets[b] ..
// offsets[b + 1]), the layout Backend::EmbeddingBagForward reads.
struct CtrBag {
  std::vector<int64_t> offsets;  // batch + 1 entries, offsets[0] == 0
  std::vector<int64_t> ids;
};

struct CtrBatch {
  int64_t size = 0;
  std::vector<float> labels;   // size
  std::vector<float> dense;    // [size, num_dense]
  std::vector<CtrBag> fields;  // num_fields
};

// Copies examples `examples` (indices into `data`, i.e. file index minus
// data.first, in the order given, repeats allowed) into *batch, reusing its
// buffers. OutOfRange names an index outside [0, data.size); *batch is then
// unspecified.
absl::Status GatherCtrBatch(const CtrDataset& data,
                            absl::Span<const int64_t> examples,
                            CtrBatch* batch);

// The ids of one field of a batch as rows of a gathered table: *unique gets
// the distinct ids in ascending order (the rows to pull) and *rows, for each
// entry of `ids`, the position of its id in *unique.
void LocalizeIds(absl::Span<const int64_t> ids, std::vector<int64_t>* unique,
                 std::vector<int64_t>* rows);

// LocalizeIds after mapping each feature id to its row of a table:
// id mod vocab_size (floor modulo, so negative hashed ids land on a row
// too) for a fixed vocabulary, the id itself for a growing table
// (vocab_size 0).
void LocalizeTableIds(int64_t vocab_size, absl::Span<const int64_t> ids,
                      std::vector<int64_t>* unique, std::vector<int64_t>* rows);

}  // namespace tessera

#endif  // TESSERA_DATA_CRITEO_CTR_DATASET_H_
