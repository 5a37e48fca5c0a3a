#include "ps_server/row_table.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace tessera {

absl::Status FixedRowTable::CheckIds(absl::Span<const int64_t> ids) const {
  const int64_t begin = shard_->def().row_offset();
  const int64_t end = begin + shard_->rows();
  for (int64_t id : ids) {
    if (id < begin || id >= end) {
      return absl::OutOfRangeError(
          absl::StrCat("id ", id, " is out of range for shard ",
                       shard_->def().name(), ", which holds rows [", begin,
                       ", ", end, ") of variable ", shard_->def().variable()));
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> FixedRowTable::LocalRows(
    absl::Span<const int64_t> ids) const {
  std::vector<int64_t> rows(ids.begin(), ids.end());
  const int64_t begin = shard_->def().row_offset();
  for (int64_t& row : rows) row -= begin;
  return rows;
}

int64_t FixedRowTable::ReadAs(absl::Span<const int64_t> ids, RowPrecision wire,
                              void* dst) {
  return shard_->ReadRowsAs(LocalRows(ids), wire, dst);
}

absl::Status CheckWirePrecision(const RowTable& table, RowPrecision wire) {
  if (wire == ROW_FP32 || wire == table.precision()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "shard ", table.def().name(), " stores its rows in ",
      RowPrecisionName(table.precision()),
      "; a pull may ask for them in fp32 "
      "or ",
      RowPrecisionName(table.precision()), ", not ",
      RowPrecision_IsValid(wire) ? RowPrecisionName(wire)
                                 : absl::StrCat("precision ", wire)));
}

int64_t FixedRowTable::Apply(absl::Span<const int64_t> ids,
                             absl::Span<const float> grads,
                             int64_t schedule_step) {
  return shard_->ApplyRows(LocalRows(ids), grads, schedule_step);
}

void SumDuplicateIds(std::vector<int64_t>* ids, std::vector<float>* grads,
                     int64_t row_elements) {
  // A worker sends each shard's rows in ascending order (Localize sorts
  // them): distinct without building a map.
  if (std::adjacent_find(ids->begin(), ids->end(),
                         std::greater_equal<int64_t>()) == ids->end()) {
    return;
  }
  absl::flat_hash_map<int64_t, int64_t> first;  // id -> its row in the output
  first.reserve(ids->size());
  for (int64_t id : *ids) first.try_emplace(id, 0);
  if (first.size() == ids->size()) return;  // the worker sent unique ids
  for (auto& [id, row] : first) row = -1;
  int64_t out = 0;
  for (size_t i = 0; i < ids->size(); ++i) {
    int64_t& row = first[(*ids)[i]];
    const float* src = grads->data() + i * row_elements;
    if (row >= 0) {
      float* dst = grads->data() + row * row_elements;
      for (int64_t k = 0; k < row_elements; ++k) dst[k] += src[k];
      continue;
    }
    row = out++;
    (*ids)[row] = (*ids)[i];
    std::copy(src, src + row_elements, grads->data() + row * row_elements);
  }
  ids->resize(out);
  grads->resize(out * row_elements);
}

}  // namespace tessera
