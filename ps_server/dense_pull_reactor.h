#ifndef TESSERA_PS_SERVER_DENSE_PULL_REACTOR_H_
#define TESSERA_PS_SERVER_DENSE_PULL_REACTOR_H_

#include <memory>
#include <vector>

#include "common/rpc/tensor_chunk_codec.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "ps_server/shard.h"
#include "ps_server/shard_store.h"

namespace tessera {

// Streams the requested shards as chunks of at most `chunk_bytes`, one write
// in flight, the next started from OnWriteDone so the client's pace sets
// ours. Each chunk is read under the shard's lock: a chunk never mixes two
// versions, though a multi-chunk shard may if a push lands mid-stream
// (asynchronous training tolerates this, as TF's async PS does).
// Deletes itself when done.
//
// The method is registered raw: the request is a serialized PullRequest,
// and each chunk goes out as a TensorChunk's wire bytes in two slices, a
// small header and the values, copied once from the shard into a fresh
// slice that gRPC sends from and frees when the bytes are on the wire.
class DensePullReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  DensePullReactor(ShardStore* store, const grpc::ByteBuffer& request,
                   int64_t chunk_bytes);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  void NextWrite();

  const int64_t chunk_bytes_;
  std::vector<std::shared_ptr<Shard>> shards_;
  size_t shard_index_ = 0;
  int64_t offset_ = 0;
  TensorChunkHeader header_;
  grpc::ByteBuffer message_;  // the write in flight
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_DENSE_PULL_REACTOR_H_
