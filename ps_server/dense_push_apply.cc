#include "ps_server/dense_push_apply.h"

#include <algorithm>
#include <string>
#include <vector>

namespace tessera {
namespace {

// A shard to update and the gradient it gets.
struct Update {
  Shard* shard;
  absl::Span<const float> grad;
  std::vector<float> average;  // sync: the step's average, owned here
};

void LockAnswerUpdate(
    std::vector<Update>& updates, PushResponse& response,
    const absl::Status& status,
    absl::FunctionRef<void(const absl::Status&, const PushResponse&)> answer) {
  std::sort(updates.begin(), updates.end(),
            [](const Update& a, const Update& b) {
              return a.shard->def().name() < b.shard->def().name();
            });
  for (Update& u : updates) {
    ShardVersion* applied = response.add_applied();
    applied->set_name(u.shard->def().name());
    applied->set_version(u.shard->BeginUpdate());
  }
  answer(status, response);
  for (Update& u : updates) u.shard->FinishUpdate(u.grad);
}

}  // namespace

void ApplyDensePush(
    absl::Span<const DenseGradient> grads, const std::optional<SyncPush>& sync,
    SyncAggregators* aggregators,
    absl::FunctionRef<void(const absl::Status&, const PushResponse&)> answer) {
  PushResponse response;
  std::vector<Update> updates;
  updates.reserve(grads.size());
  if (!sync.has_value()) {
    for (const DenseGradient& g : grads)
      updates.push_back({g.shard, g.grad, {}});
    LockAnswerUpdate(updates, response, absl::OkStatus(), answer);
    return;
  }
  absl::Status failure;
  for (const DenseGradient& g : grads) {
    const std::string& name = g.shard->def().name();
    SyncAggregator* agg = aggregators->For(name, g.shard->num_elements());
    Update u{g.shard, {}, {}};
    absl::StatusOr<SyncAggregator::Outcome> outcome =
        agg->Add(sync->step, sync->required, g.grad, &u.average);
    if (!outcome.ok()) {
      // Only a disagreement on `required` gets here. Shards handed over
      // before it keep their gradients for the step, and a step this push
      // completed is still applied: its aggregator has released it.
      failure = outcome.status();
      break;
    }
    switch (*outcome) {
      case SyncAggregator::Outcome::kAccumulated:
        response.add_pending(name);
        break;
      case SyncAggregator::Outcome::kLate:
        response.add_late(name);
        break;
      case SyncAggregator::Outcome::kReleased:
        updates.push_back(std::move(u));
        break;
    }
  }
  for (Update& u : updates) u.grad = u.average;
  LockAnswerUpdate(updates, response, failure, answer);
}

}  // namespace tessera
