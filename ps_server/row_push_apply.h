#ifndef TESSERA_PS_SERVER_ROW_PUSH_APPLY_H_
#define TESSERA_PS_SERVER_ROW_PUSH_APPLY_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/ps_service.pb.h"
#include "ps_server/row_table.h"
#include "ps_server/sync_steps.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

// The rows of one table shard in a row push, received in full, their ids
// checked against the table and their gradients found finite. A shard
// appears once per push (its parts merged by the caller).
struct RowGradient {
  std::shared_ptr<RowTable> table;
  std::vector<int64_t>* ids;  // may repeat
  std::vector<float>* grads;  // ids->size() rows
};

// Applies a validated row push; the gRPC reactor (row_reactors.h) and the
// TCP data plane (data_plane/row_plane_service.h) both end here, so every
// mode means the same on both.
//
// Asynchronous (`sync` empty, or not lockstep: its step number sets the
// rate of the schedule): repeated ids are summed (SumDuplicateIds,
// which may reorder *ids and *grads) and every shard is updated; the reply
// lists each with its new version. Sync: the complete steps before this
// one are applied first, then each shard's rows are added to its pending
// step (sync_steps.h), an empty part too; the reply lists them as pending
// or late. The error of a sync push that disagrees on `required` leaves
// the shards handed over before it with their part.
absl::Status ApplyRowPush(absl::Span<const RowGradient> parts,
                          const std::optional<SyncPush>& sync,
                          SyncSteps* sync_steps, PushResponse* response);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_ROW_PUSH_APPLY_H_
