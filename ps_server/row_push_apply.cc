#include "ps_server/row_push_apply.h"

namespace tessera {

absl::Status ApplyRowPush(absl::Span<const RowGradient> parts,
                          const std::optional<SyncPush>& sync,
                          SyncSteps* sync_steps, PushResponse* response) {
  if (!sync.has_value() || !sync->lockstep()) {
    const int64_t schedule_step = sync.has_value() ? sync->step : 0;
    for (const RowGradient& part : parts) {
      SumDuplicateIds(part.ids, part.grads, part.table->row_elements());
      ShardVersion* applied = response->add_applied();
      applied->set_name(part.table->def().name());
      applied->set_version(
          part.table->Apply(*part.ids, *part.grads, schedule_step));
    }
    return absl::OkStatus();
  }
  sync_steps->ApplyBefore(sync->step);
  for (const RowGradient& part : parts) {
    absl::StatusOr<SyncSteps::Outcome> outcome =
        sync_steps->AddRows(*sync, part.table, *part.ids, *part.grads);
    if (!outcome.ok()) return outcome.status();
    if (*outcome == SyncSteps::Outcome::kLate) {
      response->add_late(part.table->def().name());
    } else {
      response->add_pending(part.table->def().name());
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
