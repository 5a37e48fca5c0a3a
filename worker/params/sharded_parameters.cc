#include "worker/params/sharded_parameters.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<ShardedParameters>> ShardedParameters::Create(
    const std::vector<VariableDef>& variables,
    const google::protobuf::RepeatedPtrField<VariablePlacement>& placements,
    std::vector<PsClient*> clients, HostAllocator* host_memory,
    const Borrowed* borrowed) {
  if (borrowed != nullptr && (borrowed->values.size() != variables.size() ||
                              borrowed->grads.size() != variables.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        variables.size(), " variables but ", borrowed->values.size(),
        " borrowed value and ", borrowed->grads.size(), " gradient buffers"));
  }
  auto params = std::unique_ptr<ShardedParameters>(new ShardedParameters());
  params->groups_.resize(clients.size());
  for (size_t k = 0; k < clients.size(); ++k) {
    params->groups_[k].client = clients[k];
  }
  for (size_t v = 0; v < variables.size(); ++v) {
    const VariableDef& var = variables[v];
    const VariablePlacement* placement = nullptr;
    for (const VariablePlacement& p : placements) {
      if (p.name() == var.name) placement = &p;
    }
    if (placement == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("no placement for variable ", var.name));
    }
    const std::vector<int64_t> shape(placement->shape().dims().begin(),
                                     placement->shape().dims().end());
    if (shape != var.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("wrong shape: variable ", var.name, " is [",
                       absl::StrJoin(var.shape, ","), "] in the model but [",
                       absl::StrJoin(shape, ","), "] in the placement"));
    }
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    if (borrowed != nullptr) {
      if (static_cast<int64_t>(borrowed->values[v].size()) != elements ||
          static_cast<int64_t>(borrowed->grads[v].size()) != elements) {
        return absl::InvalidArgumentError(absl::StrCat(
            "wrong shape: variable ", var.name, " has ", elements,
            " elements, the borrowed buffers ", borrowed->values[v].size(),
            " and ", borrowed->grads[v].size()));
      }
      params->values_.push_back(borrowed->values[v]);
      params->grads_.push_back(borrowed->grads[v]);
    } else {
      params->owned_values_.emplace_back(host_memory, elements);
      params->owned_grads_.emplace_back(host_memory, elements);
      params->values_.emplace_back(params->owned_values_.back().data(),
                                   elements);
      params->grads_.emplace_back(params->owned_grads_.back().data(), elements);
    }
    if (absl::Status s = params->AddShards(var.name, shape, *placement);
        !s.ok()) {
      return s;
    }
  }
  return params;
}

absl::Status ShardedParameters::AddShards(const std::string& name,
                                          const std::vector<int64_t>& shape,
                                          const VariablePlacement& placement) {
  int64_t row_elements = 1;
  for (size_t d = 1; d < shape.size(); ++d) row_elements *= shape[d];
  const absl::Span<float> values = values_.back();
  const absl::Span<float> grads = grads_.back();
  const int64_t rows = shape.empty() ? 1 : shape[0];
  const int servers = static_cast<int>(groups_.size());
  int64_t next_row = 0;
  for (const ShardPlacement& shard : placement.shards()) {
    if (shard.row_offset() != next_row || shard.ps_task() < 0 ||
        shard.ps_task() >= servers) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement of ", name, ": shard ", shard.name(),
                       " (rows from ", shard.row_offset(), ", ps ",
                       shard.ps_task(), ") does not follow row ", next_row,
                       " on one of ", servers, " parameter servers"));
    }
    // 0 <= next_row <= rows holds here, so this cannot overflow, and
    // neither can next_row below: every view stays inside the buffer.
    if (shard.rows() < 0 || shard.rows() > rows - next_row) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement of ", name, ": shard ", shard.name(), " (",
                       shard.rows(), " rows from ", shard.row_offset(),
                       ") does not fit in the variable's ", rows, " rows"));
    }
    // A rank-0 variable is one shard of one element.
    const int64_t begin = shard.row_offset() * row_elements;
    const int64_t count = shape.empty() ? 1 : shard.rows() * row_elements;
    ServerGroup& group = groups_[shard.ps_task()];
    group.shards.push_back(shard.name());
    group.values.emplace_back(values.data() + begin, count);
    group.grads.emplace_back(grads.data() + begin, count);
    next_row += shard.rows();
  }
  if (next_row != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement of ", name, " covers ", next_row, " rows of ", rows));
  }
  return absl::OkStatus();
}

absl::Status ShardedParameters::PullAll(std::optional<int64_t> sync_step) {
  // Every request out first, then every reply: the servers work at once,
  // and on the data plane no thread is woken to make a call.
  std::vector<std::unique_ptr<PsClient::Pending>> pending;
  for (ServerGroup& g : groups_) {
    if (g.shards.empty()) continue;
    pending.push_back(
        g.client->BeginPullDense(g.shards, g.values, &g.versions, sync_step));
  }
  absl::Status first;
  for (std::unique_ptr<PsClient::Pending>& p : pending) {
    first.Update(p->Finish());
  }
  return first;
}

absl::Status ShardedParameters::PushAll(const SyncPush* sync,
                                        PushOutcome* outcome) {
  for (ServerGroup& g : groups_) g.response.Clear();
  // As PullAll: every push sent, then every reply read.
  std::vector<std::unique_ptr<PsClient::Pending>> pending;
  for (ServerGroup& g : groups_) {
    if (g.shards.empty()) continue;
    pending.push_back(g.client->BeginPushDense(g.shards, g.grads, g.versions,
                                               &g.response, sync));
  }
  absl::Status s;
  for (std::unique_ptr<PsClient::Pending>& p : pending) s.Update(p->Finish());
  if (!s.ok()) return s;
  outcome->staleness.clear();
  outcome->late_shards = 0;
  for (const ServerGroup& g : groups_) {
    outcome->late_shards += g.response.late_size();
    if (sync != nullptr && sync->lockstep()) continue;
    // The update this push made is version v; it was computed from the
    // pulled version, so v - 1 - pulled updates came in between.
    for (const ShardVersion& applied : g.response.applied()) {
      for (size_t i = 0; i < g.shards.size(); ++i) {
        if (g.shards[i] != applied.name()) continue;
        outcome->staleness.push_back(
            std::max<int64_t>(0, applied.version() - 1 - g.versions[i]));
        break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ShardedParameters::Pull(std::optional<int64_t> sync_step) {
  return PullAll(sync_step);
}

absl::Status ShardedParameters::Push(const StepPush& step,
                                     StepResponse* response) {
  if (step.scale != 0 && step.scale != 1) {
    for (absl::Span<float> g : grads_) {
      for (float& x : g) x *= step.scale;
    }
  }
  PushOutcome outcome;
  absl::Status pushed = PushAll(step.sync, &outcome);
  for (int64_t staleness : outcome.staleness) {
    response->add_staleness(staleness);
  }
  response->set_late_shards(outcome.late_shards);
  return pushed;
}

std::vector<absl::Span<const float>> ShardedParameters::values() const {
  std::vector<absl::Span<const float>> out;
  for (const auto& v : values_) out.emplace_back(v.data(), v.size());
  return out;
}

std::vector<absl::Span<float>> ShardedParameters::gradients() {
  std::vector<absl::Span<float>> out;
  for (auto& g : grads_) out.emplace_back(g.data(), g.size());
  return out;
}

}  // namespace tessera
