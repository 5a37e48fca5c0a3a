#ifndef TESSERA_PS_SERVER_DENSE_PUSH_APPLY_H_
#define TESSERA_PS_SERVER_DENSE_PUSH_APPLY_H_

#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/ps_service.pb.h"
#include "ps_server/shard.h"
#include "ps_server/sync_aggregator.h"
#include "ps_server/sync_push.h"

namespace tessera {

// One shard's whole gradient in a dense push, already received in full,
// checked against the shard's size and found finite.
struct DenseGradient {
  Shard* shard = nullptr;
  absl::Span<const float> grad;
};

// Applies a validated dense push; the gRPC reactor (dense_push_reactor.h)
// and the TCP data plane (data_plane/dense_plane_server.h) both end here,
// so every mode means the same on both planes.
//
// Asynchronous (`sync` empty): every shard is updated by its optimizer and
// the reply lists each with the version its update produced. Sync: each
// gradient goes to its step's aggregator (sync_aggregator.h); the shards
// whose step this push completed are updated with the step's average and
// listed as applied, the others as pending or late.
//
// `answer` is called exactly once, with the reply or with the error of a
// sync push that disagrees on `required` (a step this push completed is
// still applied). It is called once the shards to update are locked (in
// name order, so concurrent pushes cannot deadlock) and before the
// arithmetic: the reply travels, and the client starts its next transfer,
// while the optimizer runs; readers wait for the update, so nobody sees an
// old value once the reply is out.
void ApplyDensePush(
    absl::Span<const DenseGradient> grads, const std::optional<SyncPush>& sync,
    SyncAggregators* aggregators,
    absl::FunctionRef<void(const absl::Status&, const PushResponse&)> answer);

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_DENSE_PUSH_APPLY_H_
