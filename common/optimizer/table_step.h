// One update of an embedding table, lazy or dense as its optimizer's
// table_updates says. The parameter servers (a fixed table's shard) and
// the workers (a replicated table in their replica) both update tables
// through it, so a table trains the same wherever it lives.
#ifndef TESSERA_COMMON_OPTIMIZER_TABLE_STEP_H_
#define TESSERA_COMMON_OPTIMIZER_TABLE_STEP_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/optimizer/optimizer.h"

namespace tessera {

// The table's `rows` rows of `dim` floats are `values`; slot k's `slots[k]`
// holds optimizer.slot_row_elements(k, dim) floats per row. The update's
// gradient is zero but in rows `touched` (distinct, each < rows), whose
// gradient rows are `grads` (touched.size() * dim floats, in that order). `t`
// is which update of the table this is (its count, this one included, and
// its step on the rate schedule: UpdateStep).
//  - TABLE_UPDATES_LAZY: only the touched rows and their slots change,
//    each with its gradient row (TF's sparse apply, LazyAdam).
//  - TABLE_UPDATES_DENSE: the whole table steps, the untouched rows with
//    a zero gradient (Keras' Adam and SGD with momentum on an Embedding);
//    `scratch` holds the dense gradient and is kept for the next call.
// SGD, Adagrad, FTRL and rowwise_adagrad give the same values either way
// (a row-wise optimizer always takes the lazy path), unless the optimizer
// has a weight decay: it shrinks the rows an update moves, so a lazy update
// decays only the touched rows (as TF's sparse apply ops), a dense one all.
void ApplyTableStep(const Optimizer& optimizer, int64_t rows, int64_t dim,
                    absl::Span<const int64_t> touched,
                    absl::Span<const float> grads, UpdateStep t, float* values,
                    absl::Span<float* const> slots,
                    std::vector<float>* scratch);

}  // namespace tessera

#endif  // TESSERA_COMMON_OPTIMIZER_TABLE_STEP_H_
