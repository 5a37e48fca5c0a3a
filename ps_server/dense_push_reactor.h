#ifndef TESSERA_PS_SERVER_DENSE_PUSH_REACTOR_H_
#define TESSERA_PS_SERVER_DENSE_PUSH_REACTOR_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/rpc/tensor_chunk_codec.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "ps_server/shard.h"
#include "ps_server/shard_store.h"
#include "ps_server/sync_steps.h"
#include "ps_server/wire/push_size.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

// Receives the chunks of one PushDense stream into per-shard buffers and,
// once the stream has ended with everything the client declared
// (ps_server/wire/push_size.h) and every shard's gradient is whole, finite and
// of the right size, applies them. Any bad chunk, and a stream cut off before
// the declared size (a cancelled call, a dropped connection), ends the call
// with an error and nothing is applied. Deletes itself when done.
//
// The method is registered raw: each message is a TensorChunk's wire bytes
// in gRPC's receive slices, parsed by hand (common/rpc/tensor_chunk_codec.h)
// so that the gradient bytes are copied once, from the slices straight into
// the shard's reused gradient buffer, and checked for NaN/Inf in the same
// pass. The response is a serialized PushResponse.
class DensePushReactor final
    : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  // A sync push (`sync` set, from the call's metadata) adds each shard's
  // gradient to its step in `aggregators`; a shard is updated only when
  // its step completes (ps_server/sync_steps.h). A malformed tag
  // (`sync` not ok) refuses the push, as does a missing or malformed
  // declaration (`declared` not ok).
  DensePushReactor(ShardStore* store, SyncSteps* sync_steps,
                   absl::StatusOr<std::optional<SyncPush>> sync,
                   absl::StatusOr<PushSize> declared,
                   grpc::ByteBuffer* response);

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  struct Pending {
    std::shared_ptr<Shard> shard;
    std::unique_ptr<float[]> grad;
    int64_t received = 0;  // bytes
    int64_t base_version = 0;
  };

  absl::Status Accept(const TensorChunkView& chunk);
  absl::Status Validate() const;
  // Applies the push (ApplyDensePush, dense_push_apply.h) and answers.
  void FinishAndApply();

  ShardStore* const store_;
  SyncSteps* const sync_steps_;
  const absl::StatusOr<std::optional<SyncPush>> sync_;
  const absl::StatusOr<PushSize> declared_;
  int64_t received_bytes_ = 0;  // over all shards
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer message_;
  TensorChunkParser parser_;
  std::vector<Pending> pending_;
};

namespace internal {

// Copies the data of `chunk` to dst[0, chunk.data_bytes) piece by piece
// (a piece is one of gRPC's receive slices) and checks every float in the
// same pass (CopyFloatsAnyNonFinite), so the received bytes are read once
// and the gradient written once. A float split between two pieces is
// checked when the later one completes it. On a NaN or an infinity:
// CheckFinite's error (`first_element` is the index of dst[0] within
// `shard`), with dst partly written.
// REQUIRES: chunk.data_bytes is a multiple of sizeof(float).
absl::Status CopyChunkAndCheckFinite(const TensorChunkView& chunk, float* dst,
                                     absl::string_view shard,
                                     int64_t first_element);

}  // namespace internal
}  // namespace tessera

#endif  // TESSERA_PS_SERVER_DENSE_PUSH_REACTOR_H_
