#include "common/optimizer/table_step.h"

namespace tessera {

void ApplyTableStep(const Optimizer& optimizer, int64_t rows, int64_t dim,
                    absl::Span<const int64_t> touched,
                    absl::Span<const float> grads, UpdateStep t, float* values,
                    absl::Span<float* const> slots,
                    std::vector<float>* scratch) {
  // A row-wise optimizer steps row by row; its rows with a zero gradient
  // do not move (rowwise_adagrad), so a dense update is the lazy one.
  if (optimizer.table_updates() == TABLE_UPDATES_DENSE &&
      !optimizer.row_wise()) {
    scratch->assign(rows * dim, 0.0f);
    for (size_t i = 0; i < touched.size(); ++i) {
      const float* g = grads.data() + i * dim;
      float* row = scratch->data() + touched[i] * dim;
      for (int64_t j = 0; j < dim; ++j) row[j] += g[j];
    }
    optimizer.Apply(values, scratch->data(), slots.data(), rows * dim, t);
    return;
  }
  std::vector<float*> row_slots(slots.size());
  std::vector<int64_t> slot_dims(slots.size());
  for (size_t k = 0; k < slots.size(); ++k) {
    slot_dims[k] = optimizer.slot_row_elements(static_cast<int>(k), dim);
  }
  for (size_t i = 0; i < touched.size(); ++i) {
    const int64_t base = touched[i] * dim;
    for (size_t k = 0; k < slots.size(); ++k) {
      row_slots[k] = slots[k] + touched[i] * slot_dims[k];
    }
    optimizer.Apply(values + base, grads.data() + i * dim, row_slots.data(),
                    dim, t);
  }
}

}  // namespace tessera
