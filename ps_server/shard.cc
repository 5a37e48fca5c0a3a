#include "ps_server/shard.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/initializer.h"
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
      row_elements_(row_elements) {
  absl::MutexLock lock(&mu_);
  values_.resize(rows_ * row_elements_);
  FillInitialValues(def_.initializer(), def_.row_offset() * row_elements_,
                    absl::MakeSpan(values_));
  slots_.resize(optimizer_->num_slots());
  for (size_t k = 0; k < slots_.size(); ++k) {
    auto& slot = slots_[k];
    slot.assign(values_.size(),
                optimizer_->slot_initial_value(static_cast<int>(k)));
    slot_ptrs_.push_back(slot.data());
  }
}

int64_t Shard::resident_bytes() const {
  return byte_size() * (1 + optimizer_->num_slots());
}

int64_t Shard::version() const {
  absl::ReaderMutexLock lock(&mu_);
  return version_;
}

int64_t Shard::ReadBytes(int64_t offset, int64_t length, char* dst) const {
  absl::ReaderMutexLock lock(&mu_);
  std::memcpy(dst, reinterpret_cast<const char*>(values_.data()) + offset,
              length);
  return version_;
}

absl::Status Shard::VisitValues(
    int64_t offset, int64_t length,
    absl::FunctionRef<absl::Status(absl::Span<const float>, int64_t)> fn)
    const {
  absl::ReaderMutexLock lock(&mu_);
  return fn(absl::MakeConstSpan(values_.data() + offset, length), version_);
}

int64_t Shard::ReadRows(absl::Span<const int64_t> rows, float* dst) const {
  absl::ReaderMutexLock lock(&mu_);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(dst + i * row_elements_,
                values_.data() + rows[i] * row_elements_,
                row_elements_ * sizeof(float));
  }
  return version_;
}

int64_t Shard::ApplyDense(absl::Span<const float> grad) {
  const int64_t version = BeginUpdate();
  FinishUpdate(grad);
  return version;
}

int64_t Shard::BeginUpdate() {
  mu_.Lock();
  return version_ + 1;
}

void Shard::FinishUpdate(absl::Span<const float> grad) {
  ++updates_;
  optimizer_->Apply(values_.data(), grad.data(), slot_ptrs_.data(),
                    static_cast<int64_t>(values_.size()), updates_);
  ++version_;
  mu_.Unlock();
}

int64_t Shard::ApplyRows(absl::Span<const int64_t> rows,
                         absl::Span<const float> grads) {
  absl::MutexLock lock(&mu_);
  ++updates_;
  ApplyTableStep(*optimizer_, rows_, row_elements_, rows, grads, updates_,
                 values_.data(), slot_ptrs_, &dense_grad_);
  return ++version_;
}

absl::Status Shard::VisitState(
    absl::FunctionRef<absl::Status(const ShardStateView&)> fn) const {
  absl::ReaderMutexLock lock(&mu_);
  ShardStateView view;
  view.values = values_;
  for (const std::vector<float>& slot : slots_) view.slots.emplace_back(slot);
  view.version = version_;
  view.updates = updates_;
  return fn(view);
}

ShardState Shard::CopyState() const {
  absl::ReaderMutexLock lock(&mu_);
  return ShardState{values_, slots_, version_, updates_};
}

absl::Status Shard::RestoreState(ShardState state) {
  const size_t n = static_cast<size_t>(num_elements());
  bool fits = state.values.size() == n && state.slots.size() == slots_.size();
  for (size_t k = 0; fits && k < state.slots.size(); ++k) {
    fits = state.slots[k].size() == n;
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", def_.name(), ": a restored state of ", state.values.size(),
        " values and ", state.slots.size(), " slots does not fit a shard of ",
        n, " values and ", slots_.size(), " slots"));
  }
  absl::MutexLock lock(&mu_);
  values_ = std::move(state.values);
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
