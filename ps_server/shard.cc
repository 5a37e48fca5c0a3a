#include "ps_server/shard.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/initializer.h"
#include "common/optimizer/narrow_row_step.h"
#include "common/optimizer/table_step.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(
    const ShardDef& def, const Optimizer* optimizer) {
  if (def.dtype() != DT_FLOAT) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", def.name(), ": only float32 variables are supported"));
  }
  const auto& dims = def.shape().dims();
  const auto& var_dims = def.variable_shape().dims();
  auto shape_text = [&] {
    return absl::StrCat("shape [", absl::StrJoin(dims, ","),
                        "] of variable shape [", absl::StrJoin(var_dims, ","),
                        "] at row ", def.row_offset());
  };
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard ", def.name(), ": negative dimension in ", shape_text()));
    }
  }
  // A shard is rows [row_offset, row_offset + rows) of its variable; every
  // other dimension is the variable's.
  bool consistent = dims.size() == var_dims.size() && def.row_offset() >= 0;
  for (int i = 0; consistent && i < dims.size(); ++i) {
    // dims[0] <= var_dims[0] - row_offset: the sum could overflow.
    consistent = dims[i] >= 0 && var_dims[i] >= 0 &&
                 (i == 0 ? dims[0] <= var_dims[0] - def.row_offset()
                         : dims[i] == var_dims[i]);
  }
  if (dims.empty() && def.row_offset() != 0) consistent = false;
  if (!consistent) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", def.name(), ": ", shape_text(),
                     " is not a row range of its variable"));
  }
  int64_t rows = dims.empty() ? 1 : dims[0];
  int64_t row_elements = 1;
  // Refuse sizes that overflow or that no server could hold, before
  // allocating, so a bad request cannot take the server down.
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  for (int i = 1; i < dims.size(); ++i) {
    if (dims[i] != 0 && row_elements > kMaxElements / dims[i]) {
      row_elements = kMaxElements + 1;
      break;
    }
    row_elements *= dims[i];
  }
  if (row_elements > kMaxElements ||
      (row_elements > 0 && rows > kMaxElements / row_elements)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "shard ", def.name(), ": ", shape_text(), " is too large to hold"));
  }
  if (absl::Status s = ValidateInitializer(def.initializer()); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", def.name(), ": ", s.message()));
  }
  if (!RowPrecision_IsValid(def.precision())) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", def.name(), ": precision ", def.precision(),
                     " is not one of ROW_FP32, ROW_FP16, ROW_BF16"));
  }
  try {
    return std::unique_ptr<Shard>(
        new Shard(def, optimizer, rows, row_elements));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("shard ", def.name(), ": out of memory for ", shape_text(),
                     " with ", optimizer->num_slots(), " optimizer slots"));
  }
}

Shard::Shard(const ShardDef& def, const Optimizer* optimizer, int64_t rows,
             int64_t row_elements)
    : def_(def),
      optimizer_(optimizer),
      rows_(rows),
      row_elements_(row_elements),
      precision_(def.precision()),
      rounding_seed_(RowTableSeed(def.variable(), def.initializer().seed())) {
  absl::MutexLock lock(&mu_);
  const int64_t first = def_.row_offset() * row_elements_;
  if (narrow()) {
    // In pieces, so a narrow shard never holds its fp32 values whole.
    narrow_.resize(num_elements());
    constexpr int64_t kPiece = 1 << 16;
    std::vector<float> piece;
    for (int64_t at = 0; at < num_elements(); at += kPiece) {
      const int64_t n = std::min(kPiece, num_elements() - at);
      piece.resize(n);
      FillInitialValues(def_.initializer(), first + at, absl::MakeSpan(piece));
      NarrowRowNearest(precision_, piece.data(), narrow_.data() + at, n);
    }
  } else {
    values_.resize(num_elements());
    FillInitialValues(def_.initializer(), first, absl::MakeSpan(values_));
  }
  slots_.resize(optimizer_->num_slots());
  for (size_t k = 0; k < slots_.size(); ++k) {
    auto& slot = slots_[k];
    slot.assign(rows_ * slot_row_elements(static_cast<int>(k)),
                optimizer_->slot_initial_value(static_cast<int>(k)));
    slot_ptrs_.push_back(slot.data());
  }
}

int64_t Shard::slot_row_elements(int k) const {
  return optimizer_->slot_row_elements(k, row_elements_);
}

int64_t Shard::resident_bytes() const {
  int64_t bytes = num_elements() * RowPrecisionBytes(precision_);
  for (int k = 0; k < optimizer_->num_slots(); ++k) {
    bytes += rows_ * slot_row_elements(k) * static_cast<int64_t>(sizeof(float));
  }
  return bytes;
}

void Shard::WidenValues(int64_t begin, int64_t n, float* dst) const {
  WidenRow(precision_, narrow_.data() + begin, dst, n);
}

int64_t Shard::version() const {
  absl::ReaderMutexLock lock(&mu_);
  return version_;
}

int64_t Shard::ReadBytes(int64_t offset, int64_t length, char* dst) const {
  absl::ReaderMutexLock lock(&mu_);
  if (narrow()) {
    // Whole floats around the range, widened, then the bytes asked for.
    const int64_t first = offset / 4;
    const int64_t end = (offset + length + 3) / 4;
    std::vector<float> wide(end - first);
    WidenValues(first, end - first, wide.data());
    std::memcpy(dst, reinterpret_cast<const char*>(wide.data()) + offset % 4,
                length);
    return version_;
  }
  std::memcpy(dst, reinterpret_cast<const char*>(values_.data()) + offset,
              length);
  return version_;
}

absl::Status Shard::VisitValues(
    int64_t offset, int64_t length,
    absl::FunctionRef<absl::Status(absl::Span<const float>, int64_t)> fn)
    const {
  absl::ReaderMutexLock lock(&mu_);
  if (narrow()) {
    std::vector<float> wide(length);
    WidenValues(offset, length, wide.data());
    return fn(wide, version_);
  }
  return fn(absl::MakeConstSpan(values_.data() + offset, length), version_);
}

int64_t Shard::ReadRows(absl::Span<const int64_t> rows, float* dst) const {
  absl::ReaderMutexLock lock(&mu_);
  if (narrow()) {
    for (size_t i = 0; i < rows.size(); ++i) {
      WidenValues(rows[i] * row_elements_, row_elements_,
                  dst + i * row_elements_);
    }
    return version_;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(dst + i * row_elements_,
                values_.data() + rows[i] * row_elements_,
                row_elements_ * sizeof(float));
  }
  return version_;
}

int64_t Shard::ReadRowsAs(absl::Span<const int64_t> rows, RowPrecision wire,
                          void* dst) const {
  if (wire == ROW_FP32 || !narrow()) {
    return ReadRows(rows, static_cast<float*>(dst));
  }
  absl::ReaderMutexLock lock(&mu_);
  uint16_t* out = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(out + i * row_elements_,
                narrow_.data() + rows[i] * row_elements_,
                row_elements_ * sizeof(uint16_t));
  }
  return version_;
}

int64_t Shard::ApplyDense(absl::Span<const float> grad, int64_t schedule_step) {
  const int64_t version = BeginUpdate();
  FinishUpdate(grad, schedule_step);
  return version;
}

int64_t Shard::BeginUpdate() {
  mu_.Lock();
  return version_ + 1;
}

void Shard::ApplyWhole(float* values, const float* grad, UpdateStep t) {
  if (!optimizer_->row_wise()) {
    optimizer_->Apply(values, grad, slot_ptrs_.data(), num_elements(), t);
    return;
  }
  // A row-wise optimizer takes one row at a time (a table's dense push).
  std::vector<float*> row_slots(slots_.size());
  for (int64_t r = 0; r < rows_; ++r) {
    for (size_t k = 0; k < slots_.size(); ++k) {
      row_slots[k] = slot_ptrs_[k] + r * slot_row_elements(static_cast<int>(k));
    }
    optimizer_->Apply(values + r * row_elements_, grad + r * row_elements_,
                      row_slots.data(), row_elements_, t);
  }
}

void Shard::FinishUpdate(absl::Span<const float> grad, int64_t schedule_step) {
  ++updates_;
  const UpdateStep t = StepOf(schedule_step);
  if (narrow()) {
    std::vector<float> wide(num_elements());
    WidenValues(0, num_elements(), wide.data());
    ApplyWhole(wide.data(), grad.data(), t);
    for (int64_t r = 0; r < rows_; ++r) {
      const int64_t at = r * row_elements_;
      NarrowRowStochastic(
          precision_, wide.data() + at, narrow_.data() + at, row_elements_,
          RowRoundingSeed(rounding_seed_, updates_, def_.row_offset() + r));
    }
  } else {
    ApplyWhole(values_.data(), grad.data(), t);
  }
  ++version_;
  mu_.Unlock();
}

void Shard::ApplyNarrowRows(absl::Span<const int64_t> rows, const float* grads,
                            UpdateStep t) {
  NarrowRowStep step(*optimizer_, precision_, t, rounding_seed_, updates_);
  std::vector<float*> row_slots(slots_.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t k = 0; k < slots_.size(); ++k) {
      row_slots[k] =
          slot_ptrs_[k] + rows[i] * slot_row_elements(static_cast<int>(k));
    }
    step.Apply(narrow_.data() + rows[i] * row_elements_,
               grads + i * row_elements_, row_slots.data(), row_elements_,
               def_.row_offset() + rows[i]);
  }
}

int64_t Shard::ApplyRows(absl::Span<const int64_t> rows,
                         absl::Span<const float> grads, int64_t schedule_step) {
  absl::MutexLock lock(&mu_);
  ++updates_;
  const UpdateStep t = StepOf(schedule_step);
  if (!narrow()) {
    ApplyTableStep(*optimizer_, rows_, row_elements_, rows, grads, t,
                   values_.data(), slot_ptrs_, &dense_grad_);
  } else if (optimizer_->table_updates() == TABLE_UPDATES_DENSE &&
             !optimizer_->row_wise()) {
    // Every row steps: the dense gradient of the whole shard, row by row.
    dense_grad_.assign(num_elements(), 0.0f);
    for (size_t i = 0; i < rows.size(); ++i) {
      const float* g = grads.data() + i * row_elements_;
      float* row = dense_grad_.data() + rows[i] * row_elements_;
      for (int64_t j = 0; j < row_elements_; ++j) row[j] += g[j];
    }
    std::vector<int64_t> all(rows_);
    for (int64_t r = 0; r < rows_; ++r) all[r] = r;
    ApplyNarrowRows(all, dense_grad_.data(), t);
  } else {
    ApplyNarrowRows(rows, grads.data(), t);
  }
  return ++version_;
}

absl::Status Shard::VisitState(
    absl::FunctionRef<absl::Status(const ShardStateView&)> fn) const {
  absl::ReaderMutexLock lock(&mu_);
  ShardStateView view;
  view.precision = precision_;
  if (narrow()) {
    view.narrow = narrow_;
  } else {
    view.values = values_;
  }
  for (const std::vector<float>& slot : slots_) view.slots.emplace_back(slot);
  view.version = version_;
  view.updates = updates_;
  return fn(view);
}

ShardState Shard::CopyState() const {
  absl::ReaderMutexLock lock(&mu_);
  if (narrow()) {
    std::vector<float> wide(num_elements());
    WidenValues(0, num_elements(), wide.data());
    return ShardState{std::move(wide), slots_, version_, updates_};
  }
  return ShardState{values_, slots_, version_, updates_};
}

absl::Status Shard::RestoreState(ShardState state) {
  const size_t n = static_cast<size_t>(num_elements());
  bool fits = state.values.size() == n && state.slots.size() == slots_.size();
  for (size_t k = 0; fits && k < state.slots.size(); ++k) {
    fits = static_cast<int64_t>(state.slots[k].size()) ==
           rows_ * slot_row_elements(static_cast<int>(k));
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", def_.name(), ": a restored state of ", state.values.size(),
        " values and ", state.slots.size(), " slots does not fit a shard of ",
        n, " values and ", slots_.size(), " slots"));
  }
  absl::MutexLock lock(&mu_);
  if (narrow()) {
    // Nearest: exact for values saved from this precision, and a pure
    // function of the checkpoint for fp32 ones.
    NarrowRowNearest(precision_, state.values.data(), narrow_.data(),
                     num_elements());
  } else {
    values_ = std::move(state.values);
  }
  slots_ = std::move(state.slots);
  for (size_t k = 0; k < slots_.size(); ++k) slot_ptrs_[k] = slots_[k].data();
  version_ = state.version;
  updates_ = state.updates;
  return absl::OkStatus();
}

std::unique_ptr<float[]> Shard::AcquireBuffer() {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!spare_.empty()) {
      std::unique_ptr<float[]> buffer = std::move(spare_.back());
      spare_.pop_back();
      return buffer;
    }
  }
  // Uninitialised on purpose: every byte is overwritten by the push.
  return std::unique_ptr<float[]>(new float[num_elements()]);
}

void Shard::ReleaseBuffer(std::unique_ptr<float[]> buffer) {
  absl::MutexLock lock(&pool_mu_);
  // A few spares cover the concurrent pushes of a handful of workers.
  if (spare_.size() < 4) spare_.push_back(std::move(buffer));
}

}  // namespace tessera
