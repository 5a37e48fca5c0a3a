#ifndef TESSERA_PS_SERVER_PS_SERVICE_H_
#define TESSERA_PS_SERVER_PS_SERVICE_H_

#include <atomic>
#include <cstdint>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps_server/shard_store.h"
#include "ps_server/sync_aggregator.h"

namespace tessera {

struct PsServiceOptions {
  int task_index = 0;
  int64_t chunk_bytes = 1 << 20;  // largest chunk this server sends
};

// The callback service with PullDense and PushDense registered raw
// (grpc::ByteBuffer in and out): their TensorChunks are encoded and parsed
// by hand so the tensor bytes skip protobuf's strings. On the wire they are
// the same messages, so generated stubs still call them.
using DenseRawCallbackService =
    ParameterServer::WithRawCallbackMethod_PullDense<
        ParameterServer::WithRawCallbackMethod_PushDense<
            ParameterServer::CallbackService>>;

// The ParameterServer gRPC service over a ShardStore, with the callback
// API: unary calls answer inline, streams run as self-deleting reactors.
// Shutdown() only signals `shutdown_requested()`; the owner of the
// grpc::Server stops it, after the reply has gone out.
class ParameterServerService final : public DenseRawCallbackService {
 public:
  ParameterServerService(ShardStore* store, PsServiceOptions options);

  // Notified when a client asked the server to stop.
  absl::Notification& shutdown_requested() { return shutdown_; }

  grpc::ServerUnaryReactor* CreateShards(
      grpc::CallbackServerContext* context, const CreateShardsRequest* request,
      CreateShardsResponse* response) override;
  // `request` is a serialized PullRequest; writes TensorChunks.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* PullDense(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  // Reads TensorChunks; `response` gets a serialized PushResponse.
  grpc::ServerReadReactor<grpc::ByteBuffer>* PushDense(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<RowsChunk>* PullRows(
      grpc::CallbackServerContext* context,
      const PullRowsRequest* request) override;
  grpc::ServerReadReactor<RowsChunk>* PushRows(
      grpc::CallbackServerContext* context, PushResponse* response) override;
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const HealthRequest* request,
                                   HealthResponse* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context,
                                     const ShutdownRequest* request,
                                     ShutdownResponse* response) override;

 private:
  ShardStore* const store_;
  const PsServiceOptions options_;
  SyncAggregators sync_aggregators_;  // sync mode's pending steps
  const absl::Time start_ = absl::Now();
  std::atomic<bool> shutdown_called_{false};
  absl::Notification shutdown_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_PS_SERVICE_H_
