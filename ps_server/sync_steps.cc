#include "ps_server/sync_steps.h"

#include <algorithm>
#include <numeric>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"

namespace tessera {

// The bookkeeping of one shard's pending step: which parts are in, and
// when the step is applied or dropped. Subclasses hold the sums.
class SyncSteps::Pending {
 public:
  virtual ~Pending() = default;

  // Decides a push's fate and, when it is kept, calls `accumulate` under
  // the lock.
  absl::StatusOr<Outcome> Add(const SyncPush& sync,
                              absl::FunctionRef<void()> accumulate) {
    absl::MutexLock lock(&mu_);
    if (sync.step <= applied_ || (step_ >= 0 && sync.step < step_)) {
      ++dropped_;
      return Outcome::kLate;
    }
    if (step_ >= 0 && sync.step > step_) SettleLocked(sync.step);
    if (step_ < 0) {
      step_ = sync.step;
      required_ = sync.required;
      parts_.clear();
    } else if (sync.required != required_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sync step ", sync.step, ": a push needs ", sync.required,
          " parts, earlier pushes of the step needed ", required_));
    }
    if (std::find(parts_.begin(), parts_.end(), sync.part) != parts_.end()) {
      ++duplicates_;
      return Outcome::kDuplicate;
    }
    if (static_cast<int>(parts_.size()) >= required_) {
      ++dropped_;  // a backup worker's part, after the step was complete
      return Outcome::kLate;
    }
    accumulate();
    parts_.push_back(sync.part);
    return static_cast<int>(parts_.size()) == required_ ? Outcome::kComplete
                                                        : Outcome::kAccumulated;
  }

  void ApplyBefore(std::optional<int64_t> step) {
    absl::MutexLock lock(&mu_);
    SettleLocked(step);
  }

  // The squared norm of the average of `step` (0 when this shard holds no
  // part of it).
  absl::StatusOr<double> StepSquaredNorm(int64_t step,
                                         const std::string& name) const {
    absl::MutexLock lock(&mu_);
    if (step_ < 0 || step_ < step) return 0.0;
    if (step_ > step || static_cast<int>(parts_.size()) != required_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "global norm of sync step ", step, ": shard ", name, " holds step ",
          step_, " with ", parts_.size(), " of ", required_, " parts"));
    }
    return SquaredNormLocked(required_);
  }

  void SetClipScale(int64_t step, float scale) {
    absl::MutexLock lock(&mu_);
    clip_step_ = step;
    clip_scale_ = scale;
  }

  int64_t dropped() const {
    absl::MutexLock lock(&mu_);
    return dropped_;
  }
  int64_t duplicates() const {
    absl::MutexLock lock(&mu_);
    return duplicates_;
  }

 protected:
  // Forget the sums of the pending step.
  virtual void Clear() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // Apply the sums divided by `required`, times `clip` (global-norm
  // clipping; 1: none).
  virtual void Apply(int required, float clip)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // The squared L2 norm, in double, of the floats Apply would apply
  // unclipped.
  virtual double SquaredNormLocked(int required) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;

  mutable absl::Mutex mu_;

 private:
  void SettleLocked(std::optional<int64_t> before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (step_ < 0 || (before.has_value() && step_ >= *before)) return;
    if (static_cast<int>(parts_.size()) == required_) {
      Apply(required_, clip_step_ == step_ ? clip_scale_ : 1.0f);
      applied_ = step_;
    } else if (!before.has_value()) {
      return;  // an untagged pull leaves an incomplete step be
    } else {
      // Overtaken: its missing parts were backup workers' and never came.
      dropped_ += static_cast<int64_t>(parts_.size());
    }
    step_ = -1;
    parts_.clear();
    Clear();
  }

  int64_t step_ ABSL_GUARDED_BY(mu_) = -1;  // -1: none pending
  int required_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> parts_ ABSL_GUARDED_BY(mu_);
  int64_t applied_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t clip_step_ ABSL_GUARDED_BY(mu_) = -1;  // SetClipScale's step
  float clip_scale_ ABSL_GUARDED_BY(mu_) = 1;
};

namespace {

class DensePending final : public SyncSteps::Pending {
 public:
  explicit DensePending(std::shared_ptr<Shard> shard)
      : shard_(std::move(shard)) {}

  const Shard* shard() const { return shard_.get(); }

  absl::StatusOr<SyncSteps::Outcome> Add(const SyncPush& sync,
                                         absl::Span<const float> grad) {
    return Pending::Add(sync, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      // Summed in double so the average does not depend on arrival order
      // beyond the last bit of float rounding.
      if (sum_.empty()) sum_.assign(grad.size(), 0.0);
      for (size_t i = 0; i < grad.size(); ++i) sum_[i] += grad[i];
    });
  }

 protected:
  void Clear() override { std::fill(sum_.begin(), sum_.end(), 0.0); }

  void Apply(int required, float clip) override {
    const int64_t n = shard_->num_elements();
    average_.resize(n);
    const double scale = 1.0 / required;
    for (int64_t i = 0; i < n; ++i) {
      average_[i] = static_cast<float>(sum_.empty() ? 0.0 : sum_[i] * scale);
    }
    if (clip != 1.0f) {
      for (float& x : average_) x *= clip;
    }
    shard_->BeginUpdate();
    shard_->FinishUpdate(average_);
  }

 protected:
  double SquaredNormLocked(int required) const override {
    const double scale = 1.0 / required;
    double sum = 0;
    for (double s : sum_) {
      const double x = static_cast<float>(s * scale);
      sum += x * x;
    }
    return sum;
  }

 private:
  const std::shared_ptr<Shard> shard_;
  std::vector<double> sum_ ABSL_GUARDED_BY(mu_);
  std::vector<float> average_ ABSL_GUARDED_BY(mu_);
};

class RowPending final : public SyncSteps::Pending {
 public:
  explicit RowPending(std::shared_ptr<RowTable> table)
      : table_(std::move(table)), dim_(table_->row_elements()) {}

  const RowTable* table() const { return table_.get(); }

  absl::StatusOr<SyncSteps::Outcome> Add(const SyncPush& sync,
                                         absl::Span<const int64_t> ids,
                                         absl::Span<const float> grads) {
    return Pending::Add(sync, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (size_t i = 0; i < ids.size(); ++i) {
        auto [it, inserted] =
            slot_.try_emplace(ids[i], static_cast<int64_t>(ids_.size()));
        if (inserted) {
          ids_.push_back(ids[i]);
          sums_.resize(sums_.size() + dim_, 0.0);
        }
        double* sum = sums_.data() + it->second * dim_;
        const float* g = grads.data() + static_cast<int64_t>(i) * dim_;
        for (int64_t k = 0; k < dim_; ++k) sum[k] += g[k];
      }
    });
  }

 protected:
  void Clear() override {
    slot_.clear();
    ids_.clear();
    sums_.clear();
  }

  double SquaredNormLocked(int required) const override {
    // Ascending ids, as Apply: the same sum whatever order the parts came.
    std::vector<int64_t> order(ids_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return ids_[a] < ids_[b]; });
    const double scale = 1.0 / required;
    double sum = 0;
    for (int64_t j : order) {
      const double* row = sums_.data() + j * dim_;
      for (int64_t k = 0; k < dim_; ++k) {
        const double x = static_cast<float>(row[k] * scale);
        sum += x * x;
      }
    }
    return sum;
  }

  void Apply(int required, float clip) override {
    // Ascending ids: the same order in every run, whatever order the
    // parts came in.
    std::vector<int64_t> order(ids_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return ids_[a] < ids_[b]; });
    std::vector<int64_t> ids(ids_.size());
    std::vector<float> grads(ids_.size() * dim_);
    const double scale = 1.0 / required;
    for (size_t j = 0; j < order.size(); ++j) {
      ids[j] = ids_[order[j]];
      const double* sum = sums_.data() + order[j] * dim_;
      for (int64_t k = 0; k < dim_; ++k) {
        grads[j * dim_ + k] = static_cast<float>(sum[k] * scale);
      }
    }
    if (clip != 1.0f) {
      for (float& x : grads) x *= clip;
    }
    // Also with no row: the step counts as one update of the shard.
    table_->Apply(ids, grads);
  }

 private:
  const std::shared_ptr<RowTable> table_;
  const int64_t dim_;
  absl::flat_hash_map<int64_t, int64_t> slot_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<double> sums_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<SyncSteps::Outcome> SyncSteps::AddDense(
    const SyncPush& sync, std::shared_ptr<Shard> shard,
    absl::Span<const float> grad) {
  if (static_cast<int64_t>(grad.size()) != shard->num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sync step ", sync.step, ": gradient of shard ", shard->def().name(),
        " has ", grad.size(), " elements, the shard ", shard->num_elements()));
  }
  std::shared_ptr<Pending> pending;  // kept alive past a ResetAll
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Pending>& slot = pending_[shard->def().name()];
    auto* dense = dynamic_cast<DensePending*>(slot.get());
    // A shard made anew (re-created or restored) starts a new record.
    if (dense == nullptr || dense->shard() != shard.get()) {
      slot = std::make_shared<DensePending>(shard);
    }
    pending = slot;
  }
  return static_cast<DensePending*>(pending.get())->Add(sync, grad);
}

absl::StatusOr<SyncSteps::Outcome> SyncSteps::AddRows(
    const SyncPush& sync, std::shared_ptr<RowTable> table,
    absl::Span<const int64_t> ids, absl::Span<const float> grads) {
  if (static_cast<int64_t>(grads.size()) !=
      static_cast<int64_t>(ids.size()) * table->row_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sync step ", sync.step, ": ", ids.size(), " rows of shard ",
        table->def().name(), " need ", ids.size() * table->row_elements(),
        " floats, the gradient has ", grads.size()));
  }
  std::shared_ptr<Pending> pending;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Pending>& slot = pending_[table->def().name()];
    auto* rows = dynamic_cast<RowPending*>(slot.get());
    if (rows == nullptr || rows->table() != table.get()) {
      slot = std::make_shared<RowPending>(table);
    }
    pending = slot;
  }
  return static_cast<RowPending*>(pending.get())->Add(sync, ids, grads);
}

void SyncSteps::ApplyBefore(std::optional<int64_t> step) {
  std::vector<std::shared_ptr<Pending>> all;
  {
    absl::MutexLock lock(&mu_);
    if (pending_.empty()) return;
    all.reserve(pending_.size());
    for (const auto& [name, p] : pending_) all.push_back(p);
  }
  for (const std::shared_ptr<Pending>& p : all) p->ApplyBefore(step);
}

absl::StatusOr<std::map<std::string, double>> SyncSteps::PartialNorms(
    int64_t step,
    absl::FunctionRef<std::string(const std::string& shard)> group_of) {
  std::map<std::string, std::shared_ptr<Pending>> by_name;  // name order
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, p] : pending_) by_name.emplace(name, p);
  }
  std::map<std::string, double> partial;
  for (const auto& [name, p] : by_name) {
    std::string group = group_of(name);
    if (group.empty()) continue;
    absl::StatusOr<double> squared = p->StepSquaredNorm(step, name);
    if (!squared.ok()) return squared.status();
    partial[std::move(group)] += *squared;
  }
  return partial;
}

void SyncSteps::SetClipScales(
    int64_t step, absl::FunctionRef<float(const std::string& shard)> scale_of) {
  std::vector<std::pair<std::string, std::shared_ptr<Pending>>> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, p] : pending_) all.emplace_back(name, p);
  }
  for (const auto& [name, p] : all) p->SetClipScale(step, scale_of(name));
}

int64_t SyncSteps::dropped() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [name, p] : pending_) total += p->dropped();
  return total;
}

int64_t SyncSteps::duplicates() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [name, p] : pending_) total += p->duplicates();
  return total;
}

void SyncSteps::ResetAll() {
  absl::MutexLock lock(&mu_);
  pending_.clear();
}

}  // namespace tessera
