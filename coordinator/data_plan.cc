#include "coordinator/data_plan.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/counter_rng.h"
#include "partitioners/shard_layout.h"

namespace tessera {

absl::StatusOr<DataPlan> DataPlan::Create(int64_t num_examples, int num_shards,
                                          int64_t batch_size,
                                          int64_t steps_per_epoch,
                                          uint64_t seed) {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("data plan needs at least one shard, got ", num_shards));
  }
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size must be >= 1, got ", batch_size));
  }
  if (steps_per_epoch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps_per_epoch must be >= 0, got ", steps_per_epoch));
  }
  if (num_examples < num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat(num_examples, " training examples cannot be split over ",
                     num_shards, " workers"));
  }
  DataPlan plan;
  plan.batch_size_ = batch_size;
  plan.fixed_steps_ = steps_per_epoch;
  plan.seed_ = seed;
  // The variables' rows' split (the first n % k shards get one more), from
  // its one owner.
  absl::StatusOr<ShardLayout> layout =
      ShardLayout::Div(num_examples, num_shards);
  if (!layout.ok()) return layout.status();
  for (int s = 0; s < num_shards; ++s) {
    const int64_t begin = layout->shard_offset(s);
    plan.shards_.push_back({begin, begin + layout->shard_rows(s)});
  }
  plan.order_.resize(num_shards);
  plan.cursor_.assign(num_shards, 0);
  plan.pass_.assign(num_shards, 0);
  for (int s = 0; s < num_shards; ++s) plan.order_[s] = plan.Permutation(s, 0);
  return plan;
}

int64_t DataPlan::steps_per_epoch() const {
  if (fixed_steps_ > 0) return fixed_steps_;
  int64_t steps = 0;
  for (const DataShard& s : shards_) {
    steps += (s.size() + batch_size_ - 1) / batch_size_;
  }
  return steps;
}

std::vector<int64_t> DataPlan::Permutation(int shard, int64_t pass) const {
  std::vector<int64_t> ids(shards_[shard].size());
  std::iota(ids.begin(), ids.end(), shards_[shard].begin);
  // std::shuffle's output is implementation-defined, so shuffle by hand
  // (Fisher-Yates on the counter generator) to keep plans portable.
  const uint64_t s = DeriveSeed(DeriveSeed(seed_, shard), pass);
  for (int64_t i = static_cast<int64_t>(ids.size()) - 1; i > 0; --i) {
    const int64_t j =
        static_cast<int64_t>(CounterHash(s, i) % static_cast<uint64_t>(i + 1));
    std::swap(ids[i], ids[j]);
  }
  return ids;
}

std::vector<int64_t> DataPlan::TakeBatch(int shard) {
  std::vector<int64_t> batch;
  batch.reserve(batch_size_);
  while (static_cast<int64_t>(batch.size()) < batch_size_) {
    if (cursor_[shard] == static_cast<int64_t>(order_[shard].size())) {
      order_[shard] = Permutation(shard, ++pass_[shard]);
      cursor_[shard] = 0;
    }
    batch.push_back(order_[shard][cursor_[shard]++]);
  }
  return batch;
}

std::vector<PlannedStep> DataPlan::NextEpoch() {
  std::vector<PlannedStep> steps;
  const int n = static_cast<int>(shards_.size());
  if (fixed_steps_ > 0) {
    for (int64_t i = 0; i < fixed_steps_; ++i) {
      const int shard = static_cast<int>(i % n);
      steps.push_back({shard, TakeBatch(shard), {}});
    }
  } else {
    std::vector<std::vector<int64_t>> orders(n);
    for (int s = 0; s < n; ++s) orders[s] = Permutation(s, epoch_);
    std::vector<size_t> next(n, 0);
    bool any = true;
    while (any) {
      any = false;
      for (int s = 0; s < n; ++s) {
        if (next[s] >= orders[s].size()) continue;
        const size_t take =
            std::min<size_t>(batch_size_, orders[s].size() - next[s]);
        steps.push_back(
            {s,
             std::vector<int64_t>(orders[s].begin() + next[s],
                                  orders[s].begin() + next[s] + take),
             {}});
        next[s] += take;
        any = true;
      }
    }
  }
  ++epoch_;
  return steps;
}

absl::StatusOr<StreamPlan> StreamPlan::Create(std::vector<int64_t> shard_sizes,
                                              int64_t batch_size,
                                              int64_t steps_per_epoch) {
  if (shard_sizes.empty() || batch_size < 1 || steps_per_epoch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream plan needs shards (got ", shard_sizes.size(),
                     "), batch_size >= 1 (got ", batch_size,
                     ") and steps_per_epoch >= 0 "
                     "(got ",
                     steps_per_epoch, ")"));
  }
  for (size_t k = 0; k < shard_sizes.size(); ++k) {
    if (shard_sizes[k] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard ", k, " of the training files holds no records (",
          shard_sizes.size(), " shards: more workers than records?)"));
    }
  }
  StreamPlan plan;
  plan.sizes_ = std::move(shard_sizes);
  plan.batch_size_ = batch_size;
  plan.fixed_steps_ = steps_per_epoch;
  plan.cursors_.assign(plan.sizes_.size(), Cursor());
  return plan;
}

int64_t StreamPlan::steps_per_epoch() const {
  if (fixed_steps_ > 0) return fixed_steps_;
  int64_t steps = 0;
  for (int64_t size : sizes_) steps += (size + batch_size_ - 1) / batch_size_;
  return steps;
}

absl::Status StreamPlan::Restore(int64_t epoch, std::vector<Cursor> cursors) {
  if (epoch < 0 || cursors.size() != sizes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stream plan state for ", cursors.size(), " shards at epoch ", epoch,
        "; the plan has ", sizes_.size(), " shards"));
  }
  for (size_t k = 0; k < cursors.size(); ++k) {
    if (cursors[k].pass < 0 || cursors[k].position < 0 ||
        cursors[k].position > sizes_[k]) {
      return absl::InvalidArgumentError(
          absl::StrCat("stream plan cursor of shard ", k, " is outside it"));
    }
  }
  epoch_ = epoch;
  cursors_ = std::move(cursors);
  return absl::OkStatus();
}

PlannedStreamStep StreamPlan::Take(int shard) {
  Cursor& c = cursors_[shard];
  if (c.position == sizes_[shard]) {
    ++c.pass;
    c.position = 0;
  }
  PlannedStreamStep step;
  step.shard = shard;
  step.pass = c.pass;
  step.first = c.position;
  step.count = std::min(batch_size_, sizes_[shard] - c.position);
  c.position += step.count;
  return step;
}

std::vector<PlannedStreamStep> StreamPlan::NextEpoch() {
  std::vector<PlannedStreamStep> steps;
  const int n = static_cast<int>(sizes_.size());
  if (fixed_steps_ > 0) {
    for (int64_t i = 0; i < fixed_steps_; ++i) {
      steps.push_back(Take(static_cast<int>(i % n)));
    }
  } else {
    std::vector<int64_t> next(n, 0);
    bool any = true;
    while (any) {
      any = false;
      for (int s = 0; s < n; ++s) {
        if (next[s] >= sizes_[s]) continue;
        PlannedStreamStep step;
        step.shard = s;
        step.pass = epoch_;
        step.first = next[s];
        step.count = std::min(batch_size_, sizes_[s] - next[s]);
        next[s] += step.count;
        steps.push_back(step);
        any = true;
      }
    }
  }
  ++epoch_;
  return steps;
}

}  // namespace tessera
