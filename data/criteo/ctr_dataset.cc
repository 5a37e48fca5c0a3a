#include "data/criteo/ctr_dataset.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::Status GatherCtrBatch(const CtrDataset& data,
                            absl::Span<const int64_t> examples,
                            CtrBatch* batch) {
  for (size_t i = 0; i < examples.size(); ++i) {
    if (examples[i] < 0 || examples[i] >= data.size) {
      return absl::OutOfRangeError(absl::StrCat(
          "example ", examples[i], " (batch row ", i,
          ") is outside the data set's ", data.size, " examples (file [",
          data.first, ", ", data.first + data.size, "))"));
    }
  }
  const int64_t n = static_cast<int64_t>(examples.size());
  batch->size = n;
  batch->labels.resize(n);
  batch->dense.resize(n * data.num_dense);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t e = examples[b];
    batch->labels[b] = data.has_labels ? data.labels[e] : 0.0f;
    std::copy_n(data.dense_row(e), data.num_dense,
                batch->dense.data() + b * data.num_dense);
  }
  batch->fields.resize(data.num_fields);
  for (int f = 0; f < data.num_fields; ++f) {
    const CtrFieldColumn& column = data.fields[f];
    CtrBag& bag = batch->fields[f];
    bag.offsets.resize(n + 1);
    bag.offsets[0] = 0;
    bag.ids.clear();
    for (int64_t b = 0; b < n; ++b) {
      const int64_t e = examples[b];
      bag.ids.insert(bag.ids.end(), column.ids.begin() + column.offsets[e],
                     column.ids.begin() + column.offsets[e + 1]);
      bag.offsets[b + 1] = static_cast<int64_t>(bag.ids.size());
    }
  }
  return absl::OkStatus();
}

void LocalizeIds(absl::Span<const int64_t> ids, std::vector<int64_t>* unique,
                 std::vector<int64_t>* rows) {
  unique->assign(ids.begin(), ids.end());
  std::sort(unique->begin(), unique->end());
  unique->erase(std::unique(unique->begin(), unique->end()), unique->end());
  rows->resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    (*rows)[i] = std::lower_bound(unique->begin(), unique->end(), ids[i]) -
                 unique->begin();
  }
}

void LocalizeTableIds(int64_t vocab_size, absl::Span<const int64_t> ids,
                      std::vector<int64_t>* unique,
                      std::vector<int64_t>* rows) {
  if (vocab_size == 0) {
    LocalizeIds(ids, unique, rows);
    return;
  }
  std::vector<int64_t> mapped(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t r = ids[i] % vocab_size;
    mapped[i] = r < 0 ? r + vocab_size : r;
  }
  LocalizeIds(mapped, unique, rows);
}

}  // namespace tessera
