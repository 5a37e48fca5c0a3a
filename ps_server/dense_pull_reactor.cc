#include "ps_server/dense_pull_reactor.h"

#include <algorithm>

#include "common/rpc/grpc_status.h"
#include "grpc/slice.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/ps_service.pb.h"

namespace tessera {

DensePullReactor::DensePullReactor(ShardStore* store,
                                   const grpc::ByteBuffer& request,
                                   int64_t chunk_bytes)
    : chunk_bytes_(std::max<int64_t>(chunk_bytes, 1)) {
  PullRequest pull;
  {
    // The reader consumes a buffer; read a copy (it shares the slices).
    grpc::ByteBuffer copy(request);
    grpc::ProtoBufferReader reader(&copy);
    if (!reader.status().ok() || !pull.ParseFromZeroCopyStream(&reader)) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "PullDense: the request is not a PullRequest"));
      return;
    }
  }
  for (const std::string& name : pull.shards()) {
    absl::StatusOr<std::shared_ptr<Shard>> shard = store->Find(name);
    if (!shard.ok()) {
      Finish(ToGrpcStatus(shard.status()));
      return;
    }
    shards_.push_back(*std::move(shard));
  }
  NextWrite();
}

void DensePullReactor::NextWrite() {
  // Zero-size shards still send one empty chunk, so the client sees them.
  while (shard_index_ < shards_.size()) {
    const Shard& shard = *shards_[shard_index_];
    if (offset_ < shard.byte_size() ||
        (offset_ == 0 && shard.byte_size() == 0)) {
      const int64_t length =
          std::min(chunk_bytes_, shard.byte_size() - offset_);
      grpc_slice data = grpc_slice_malloc(length);
      header_.name = shard.def().name();
      header_.offset = offset_;
      header_.total_bytes = shard.byte_size();
      header_.version = shard.ReadBytes(
          offset_, length, reinterpret_cast<char*>(GRPC_SLICE_START_PTR(data)));
      message_ = MakeTensorChunkBuffer(
          header_, grpc::Slice(data, grpc::Slice::STEAL_REF));
      offset_ += std::max<int64_t>(length, 1);
      StartWrite(&message_);
      return;
    }
    ++shard_index_;
    offset_ = 0;
  }
  Finish(grpc::Status::OK);
}

void DensePullReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
    return;
  }
  NextWrite();
}

void DensePullReactor::OnDone() { delete this; }

}  // namespace tessera
