#ifndef TESSERA_PS_SERVER_ROW_REACTORS_H_
#define TESSERA_PS_SERVER_ROW_REACTORS_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/server_callback.h"
#include "proto/ps_service.pb.h"
#include "proto/tensor.pb.h"
#include "ps_server/row_table.h"
#include "ps_server/shard_store.h"
#include "ps_server/sync_steps.h"
#include "ps_server/wire/push_size.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

// Sparse transfers address rows by their id in the whole variable. A fixed
// shard holding rows [row_offset, row_offset + rows) refuses any other id,
// a hash-table shard any id HashShardOf routes elsewhere, with OutOfRange
// naming it. Decodes `id_bytes` and checks the ids against `table`.
absl::StatusOr<std::vector<int64_t>> DecodeIds(const RowTable& table,
                                               absl::string_view id_bytes);

// Streams the rows a PullRows request names, in request order (repeats
// allowed), as chunks of at most `chunk_bytes` of values. A hash table
// creates the rows it does not hold yet. Deletes itself when done.
class RowPullReactor final : public grpc::ServerWriteReactor<RowsChunk> {
 public:
  RowPullReactor(ShardStore* store, const PullRowsRequest& request,
                 int64_t chunk_bytes);
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  void NextWrite();

  std::shared_ptr<RowTable> table_;
  std::vector<int64_t> ids_;
  RowPrecision precision_ = ROW_FP32;  // of the values sent
  int64_t rows_per_chunk_ = 1;
  int64_t next_ = 0;
  RowsChunk chunk_;
};

// Receives a PushRows stream, validates all of it (shard, ids, sizes,
// finiteness), then applies the row gradients (ApplyRowPush,
// row_push_apply.h: at once, or as a part of a sync step); nothing is
// applied when any chunk is bad. Chunks of one shard may come in any order
// and an id may repeat: repeats are summed first, as Keras does. Each shard
// named is updated once and reported once; a chunk with no rows names a
// shard all the same (a sync part that touched none of its rows). Deletes
// itself when done.
class RowPushReactor final : public grpc::ServerReadReactor<RowsChunk> {
 public:
  // A missing or malformed declaration (`declared` not ok) or sync tag
  // refuses the push; a stream that ends short of it applies nothing.
  RowPushReactor(ShardStore* store, SyncSteps* sync_steps,
                 absl::StatusOr<std::optional<SyncPush>> sync,
                 absl::StatusOr<PushSize> declared, PushResponse* response);
  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  struct Pending {
    std::shared_ptr<RowTable> table;
    std::vector<int64_t> ids;
    std::vector<float> grads;
  };
  absl::Status Accept(const RowsChunk& chunk);
  absl::Status ApplyAll();

  ShardStore* const store_;
  SyncSteps* const sync_steps_;
  const absl::StatusOr<std::optional<SyncPush>> sync_;
  const absl::StatusOr<PushSize> declared_;
  PushResponse* const response_;
  RowsChunk chunk_;
  int64_t received_rows_ = 0;
  int64_t received_bytes_ = 0;
  std::vector<Pending> pending_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_ROW_REACTORS_H_
