#include "worker/params/mirrored_parameters.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/initializer.h"
#include "common/io/crc32c.h"
#include "common/optimizer/table_step.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<MirroredParameters>> MirroredParameters::Create(
    const std::vector<VariableDef>& variables, const OptimizerConfig& optimizer,
    HostAllocator* host_memory) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(optimizer);
  if (!opt.ok()) return opt.status();
  std::unique_ptr<MirroredParameters> p(new MirroredParameters());
  p->optimizers_.push_back(*std::move(opt));
  p->defs_ = variables;
  p->optimizer_ = optimizer;
  // Every variable trains with `optimizer` but a moving statistic, whose
  // "gradient" is a batch statistic and is never clipped.
  std::vector<const OptimizerConfig*> clipped_by;
  std::vector<std::string> names;
  for (const VariableDef& var : variables) {
    clipped_by.push_back(var.update_rule.has_value() ? nullptr : &optimizer);
    names.push_back(var.name);
  }
  absl::StatusOr<GradientClipPlan> plan =
      GradientClipPlan::Create(clipped_by, names);
  if (!plan.ok()) return plan.status();
  p->clip_plan_ = *std::move(plan);
  int64_t total = 0;
  for (const VariableDef& var : variables) {
    int64_t n = 1;
    for (int64_t d : var.shape) n *= d;
    HostArray<float> values(host_memory, n);
    FillInitialValues(var.initializer, 0, absl::MakeSpan(values.data(), n));
    // A variable with a rule of its own (a moving statistic) folds in the
    // all-reduced value with that rule, as a parameter server would.
    Optimizer* rule = p->optimizers_[0].get();
    if (var.update_rule.has_value()) {
      absl::StatusOr<std::unique_ptr<Optimizer>> own =
          CreateOptimizer(*var.update_rule);
      if (!own.ok()) return own.status();
      p->optimizers_.push_back(*std::move(own));
      rule = p->optimizers_.back().get();
    }
    p->optimizer_of_.push_back(rule);
    std::vector<std::vector<float>> slots;
    for (int k = 0; k < rule->num_slots(); ++k) {
      slots.emplace_back(n, rule->slot_initial_value(k));
    }
    p->names_.push_back(var.name);
    p->values_.push_back(std::move(values));
    p->slots_.push_back(std::move(slots));
    p->offsets_.push_back(total);
    total += n;
  }
  for (const VariableDef& var : variables) {
    const bool table = var.sparse && var.shape.size() == 2;
    p->touched_offsets_.push_back(table ? total : -1);
    if (table) total += var.shape[0];
  }
  p->reduce_ = HostArray<float>(host_memory, total + 1);
  return p;
}

std::vector<absl::Span<const float>> MirroredParameters::values() const {
  std::vector<absl::Span<const float>> out;
  for (const auto& v : values_) out.emplace_back(v.data(), v.size());
  return out;
}

std::vector<absl::Span<float>> MirroredParameters::gradients() {
  std::vector<absl::Span<float>> out;
  for (size_t i = 0; i < values_.size(); ++i) {
    out.emplace_back(reduce_.data() + offsets_[i], values_[i].size());
  }
  return out;
}

absl::Span<float> MirroredParameters::touched_rows(int v) {
  if (touched_offsets_[v] < 0) return {};
  return absl::MakeSpan(reduce_.data() + touched_offsets_[v],
                        defs_[v].shape[0]);
}

void MirroredParameters::SetWeight(double weight) {
  const float w = static_cast<float>(weight);
  for (int64_t i = 0; i + 1 < reduce_.size(); ++i) reduce_[i] *= w;
  reduce_[reduce_.size() - 1] = w;
}

void MirroredParameters::ZeroGradients() {
  std::fill(reduce_.begin(), reduce_.end(), 0.0f);
}

absl::Status MirroredParameters::ApplyReduced() {
  const float total = reduce_[reduce_.size() - 1];
  if (!std::isfinite(total) || total < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("all-reduced example weight is ", total));
  }
  if (total == 0) return absl::OkStatus();
  for (size_t v = 0; v < values_.size(); ++v) {
    const float* g = reduce_.data() + offsets_[v];
    for (int64_t i = 0; i < values_[v].size(); ++i) {
      if (!std::isfinite(g[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "all-reduced gradient of ", names_[v], " is not finite at element ",
            i, ": some worker pushed a NaN or Inf; nothing was applied"));
      }
    }
  }
  // Clipped after the all-reduce, on the global batch's mean gradient (the
  // buffer holds it times `total`), alike on every replica, as Keras clips
  // under MirroredStrategy.
  clip_plan_.Clip(gradients(), total);
  ++updates_;
  const float scale = 1.0f / total;
  std::vector<float> grad;
  std::vector<int64_t> rows;
  for (size_t v = 0; v < values_.size(); ++v) {
    const float* g = reduce_.data() + offsets_[v];
    const int64_t n = values_[v].size();
    std::vector<float*> slots;
    for (auto& s : slots_[v]) slots.push_back(s.data());
    if (touched_offsets_[v] >= 0) {
      // A table: the rows some worker touched, stepped as a server steps
      // its shard, so the placement does not change what it learns.
      const int64_t dim = defs_[v].shape[1];
      const absl::Span<const float> marks = touched_rows(static_cast<int>(v));
      rows.clear();
      grad.clear();
      for (int64_t r = 0; r < static_cast<int64_t>(marks.size()); ++r) {
        if (marks[r] == 0) continue;
        rows.push_back(r);
        for (int64_t j = 0; j < dim; ++j) {
          grad.push_back(g[r * dim + j] * scale);
        }
      }
      ApplyTableStep(*optimizer_of_[v], static_cast<int64_t>(marks.size()), dim,
                     rows, grad, updates_, values_[v].data(), slots,
                     &table_scratch_);
      continue;
    }
    grad.assign(g, g + n);
    for (float& x : grad) x *= scale;
    optimizer_of_[v]->Apply(values_[v].data(), grad.data(), slots.data(), n,
                            updates_);
  }
  return absl::OkStatus();
}

absl::Status MirroredParameters::Pull(std::optional<int64_t> /*sync_step*/) {
  // The replicas are in step by their all-reduces: nothing to fetch.
  return absl::OkStatus();
}

float* MirroredParameters::device_gradients() {
  if (collective_.all_reducer == nullptr || !collective_.device_sum ||
      !collective_.all_reducer->on_device()) {
    return nullptr;
  }
  const int64_t n = reduce_.size();
  if (device_reduce_.size() != n) {
    device_reduce_ = DeviceArray<float>(collective_.backend, n);
  }
  return device_reduce_.data();
}

absl::Status MirroredParameters::Push(const StepPush& step,
                                      StepResponse* response) {
  if (collective_.all_reducer == nullptr) {
    return absl::FailedPreconditionError(
        "a replica without an all-reduce group cannot push");
  }
  absl::Status reduced = device_gradients() != nullptr
                             ? ReduceOnDevice(step.examples)
                             : ReduceOnHost(step.examples);
  if (!reduced.ok()) return reduced;
  if (absl::Status s = ApplyReduced(); !s.ok()) return s;
  response->set_replica_checksum(Checksum());
  if (step.examples == 0) response->set_examples(0);
  return absl::OkStatus();
}

absl::Status MirroredParameters::ReduceOnDevice(int64_t examples) {
  // TrainStepOnDevice wrote the weighted gradients; the weight goes after
  // them (a replica without examples sends zeros).
  Backend* backend = collective_.backend;
  float* data = device_reduce_.data();
  const int64_t n = reduce_.size();
  if (examples == 0) {
    backend->Fill(n, 0.0f, data);
  } else {
    backend->Fill(1, static_cast<float>(examples), data + n - 1);
  }
  if (absl::Status s = backend->status(); !s.ok()) return s;
  if (absl::Status s = collective_.all_reducer->AllReduceOnDevice(
          absl::MakeSpan(data, n), backend->native_stream());
      !s.ok()) {
    return s;
  }
  // The sum's one trip to the host, where the optimizer runs (pinned
  // memory on a GPU: no staging).
  backend->CopyToHost(data, reduce_.data(), n * sizeof(float));
  return backend->Synchronize();
}

absl::Status MirroredParameters::ReduceOnHost(int64_t examples) {
  if (examples == 0) {
    ZeroGradients();
  } else {
    SetWeight(static_cast<double>(examples));
  }
  return collective_.all_reducer->AllReduce(reduce_buffer());
}

uint32_t MirroredParameters::Checksum() const {
  uint32_t crc = 0;
  for (const auto& v : values_) {
    crc = crc32c::Extend(crc, reinterpret_cast<const char*>(v.data()),
                         v.size() * sizeof(float));
  }
  return crc;
}

}  // namespace tessera
