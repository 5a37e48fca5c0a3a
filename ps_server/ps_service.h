#ifndef TESSERA_PS_SERVER_PS_SERVICE_H_
#define TESSERA_PS_SERVER_PS_SERVICE_H_

#include <atomic>
#include <cstdint>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/transport_limits.h"
#include "common/serial_executor.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps_server/ps_core.h"

namespace tessera {

struct PsServiceOptions {
  int task_index = 0;
  int64_t chunk_bytes = kDefaultChunkBytes;  // largest chunk it sends
  // Every call must carry the job's token; the default (no token) accepts
  // every call, as tests and single-user machines do.
  RpcAuth auth;
};

// The callback service with PullDense and PushDense registered raw
// (grpc::ByteBuffer in and out): their TensorChunks are encoded and parsed
// by hand so the tensor bytes skip protobuf's strings. On the wire they are
// the same messages, so generated stubs still call them.
using DenseRawCallbackService =
    ParameterServer::WithRawCallbackMethod_PullDense<
        ParameterServer::WithRawCallbackMethod_PushDense<
            ParameterServer::CallbackService>>;

// The ParameterServer gRPC service over a PsCore (ps_core.h: the shards,
// sync steps and counters it shares with the data plane), with the callback
// API: unary calls answer inline, streams run as self-deleting reactors.
// Every call first checks the job token (options.auth) and is refused with
// UNAUTHENTICATED, before it touches anything, when it lacks it.
// SaveShards and RestoreShards do file I/O (seconds per GB), so they run
// one at a time on a thread of the service, never on gRPC's callback
// threads. Shutdown() only signals `shutdown_requested()`; the owner of the
// grpc::Server stops it, after the reply has gone out.
class ParameterServerService final : public DenseRawCallbackService {
 public:
  // `core` must outlive the service.
  ParameterServerService(PsCore* core, PsServiceOptions options);

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
  // Writes this server's shards into request->directory
  // (ps_server/shard_checkpoint.h).
  grpc::ServerUnaryReactor* SaveShards(grpc::CallbackServerContext* context,
                                       const SaveShardsRequest* request,
                                       SaveShardsResponse* response) override;
  // Fills this server's shards from the checkpoint request->manifest
  // describes, re-sharding as needed; all change or none.
  grpc::ServerUnaryReactor* RestoreShards(
      grpc::CallbackServerContext* context, const RestoreShardsRequest* request,
      RestoreShardsResponse* response) override;
  // Global-norm clipping of a complete sync step (sync_steps.h
  // PartialNorms, SetClipScales): no norms asks for this server's partial
  // squared norms; norms set the scale each shard's step is applied with.
  grpc::ServerUnaryReactor* StepNorm(grpc::CallbackServerContext* context,
                                     const StepNormRequest* request,
                                     StepNormResponse* response) override;

 private:
  // Finishes `reactor` with UNAUTHENTICATED and returns true when the call
  // lacks the job token.
  bool Refused(grpc::CallbackServerContext* context, const char* method,
               grpc::ServerUnaryReactor* reactor) const;

  // A pull reads the values after every sync step before the one it is
  // tagged with (every complete step when untagged); InvalidArgument for
  // a malformed tag.
  absl::Status ApplySyncStepsFor(const grpc::CallbackServerContext& context);

  PsCore* const core_;
  ShardStore* const store_;  // the core's
  const PsServiceOptions options_;
  std::atomic<bool> shutdown_called_{false};
  absl::Notification shutdown_;
  // Last, so it is destroyed first: it finishes the checkpoint calls
  // already posted while the members they use still exist.
  SerialExecutor checkpoint_io_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_PS_SERVICE_H_
