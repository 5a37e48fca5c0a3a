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
};

void LockAnswerUpdate(
    std::vector<Update>& updates, int64_t schedule_step, PushResponse& response,
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
  answer(absl::OkStatus(), response);
  for (Update& u : updates) u.shard->FinishUpdate(u.grad, schedule_step);
}

}  // namespace

void ApplyDensePush(
    absl::Span<const DenseGradient> grads, const std::optional<SyncPush>& sync,
    SyncSteps* sync_steps,
    absl::FunctionRef<void(const absl::Status&, const PushResponse&)> answer) {
  PushResponse response;
  if (!sync.has_value() || !sync->lockstep()) {
    std::vector<Update> updates;
    updates.reserve(grads.size());
    for (const DenseGradient& g : grads) {
      updates.push_back({g.shard.get(), g.grad});
    }
    LockAnswerUpdate(updates, sync.has_value() ? sync->step : 0, response,
                     answer);
    return;
  }
  sync_steps->ApplyBefore(sync->step);
  absl::Status failure;
  for (const DenseGradient& g : grads) {
    const std::string& name = g.shard->def().name();
    absl::StatusOr<SyncSteps::Outcome> outcome =
        sync_steps->AddDense(*sync, g.shard, g.grad);
    if (!outcome.ok()) {
      failure = outcome.status();
      break;
    }
    if (*outcome == SyncSteps::Outcome::kLate) {
      response.add_late(name);
    } else {
      response.add_pending(name);
    }
  }
  answer(failure, response);
}

}  // namespace tessera
