#ifndef TESSERA_PS_SERVER_DENSE_PUSH_APPLY_H_
#define TESSERA_PS_SERVER_DENSE_PUSH_APPLY_H_

#include <memory>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/ps_service.pb.h"
#include "ps_server/shard.h"
#include "ps_server/sync_steps.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

// One shard's whole gradient in a dense push, already received in full,
// checked against the shard's size and found finite.
struct DenseGradient {
  std::shared_ptr<Shard> shard;
  absl::Span<const float> grad;
};

// Applies a validated dense push; the gRPC reactor (dense_push_reactor.h)
// and the TCP data plane (data_plane/dense_plane_server.h) both end here,
// so every mode means the same on both planes.
//
// Asynchronous (`sync` empty, or not lockstep: its step number sets the
// rate of the schedule): every shard is updated by its optimizer and
// the reply lists each with the version its update produced; `answer` is
// called once the shards to update are locked (in name order, so
// concurrent pushes cannot deadlock) and before the arithmetic: the reply
// travels, and the client starts its next transfer, while the optimizer
// runs; readers wait for the update, so nobody sees an old value once the
// reply is out.
//
// Sync: the complete steps before this one are applied first, then each
// gradient is added to its shard's pending step (sync_steps.h), applied
// later; the reply lists the shards as pending or late. `answer` is
// called with the error of a push that disagrees on `required` (shards
// handed over before it keep their part).
void ApplyDensePush(
    absl::Span<const DenseGradient> grads, const std::optional<SyncPush>& sync,
    SyncSteps* sync_steps,
    absl::FunctionRef<void(const absl::Status&, const PushResponse&)> answer);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_DENSE_PUSH_APPLY_H_
