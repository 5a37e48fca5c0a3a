#ifndef TESSERA_PS_SERVER_CLIENT_GRPC_TRANSPORT_H_
#define TESSERA_PS_SERVER_CLIENT_GRPC_TRANSPORT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/impl/rpc_method.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps_server/client/ps_transport.h"

namespace tessera {

struct GrpcTransportOptions {
  int64_t chunk_bytes = 0;  // largest chunk pushed
  double timeout_s = 0;     // of every call
  std::string peer;         // prefixes every error, e.g. "ps 1 (host:port)"
};

// Data calls as gRPC streams on the server's channel. Dense tensors travel
// as TensorChunks in grpc::ByteBuffers (common/rpc/tensor_chunk_codec.h), so
// a gradient goes out from the caller's memory and pulled values land in
// the caller's buffer with one copy; a call of several row shards is one
// call per shard (each shard's push all-or-nothing, not the whole call).
//
// gRPC's blocking calls have no halves, so a split call runs whole on a
// thread the transport keeps (one per call in flight, reused).
class GrpcTransport final : public PsTransport {
 public:
  GrpcTransport(std::shared_ptr<grpc::Channel> channel,
                GrpcTransportOptions options);
  ~GrpcTransport() override;

  absl::Status PullDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<float>> out,
                         std::vector<int64_t>* versions,
                         std::optional<int64_t> sync_step) override;
  absl::Status PushDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<const float>> grads,
                         absl::Span<const int64_t> base_versions,
                         PushResponse* response, const SyncPush* sync) override;
  std::unique_ptr<Pending> BeginPullDense(
      absl::Span<const std::string> shards,
      absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
      std::optional<int64_t> sync_step) override;
  std::unique_ptr<Pending> BeginPushDense(
      absl::Span<const std::string> shards,
      absl::Span<const absl::Span<const float>> grads,
      absl::Span<const int64_t> base_versions, PushResponse* response,
      const SyncPush* sync) override;
  absl::Status PullRows(absl::Span<const RowsPart> parts,
                        absl::Span<const absl::Span<float>> out,
                        std::optional<int64_t> sync_step) override;
  absl::Status PushRows(absl::Span<const RowsPart> parts,
                        absl::Span<const absl::Span<const float>> grads,
                        PushResponse* response, const SyncPush* sync) override;

 private:
  std::string Peer(const char* call) const;
  absl::Status PullRowsOfShard(const RowsPart& part, absl::Span<float> out,
                               std::optional<int64_t> sync_step);
  absl::Status PushRowsOfShard(const RowsPart& part,
                               absl::Span<const float> grads,
                               PushResponse* response, const SyncPush* sync);
  // Runs `call` whole on a kept thread; the Pending's Finish waits for it.
  std::unique_ptr<Pending> InBackground(std::function<absl::Status()> call);
  void ServeBackground();

  const GrpcTransportOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ParameterServer::Stub> stub_;
  // PullDense and PushDense bypass the stub (raw ByteBuffers); registered
  // once per transport, as the stub does for its methods.
  const grpc::internal::RpcMethod pull_dense_method_;
  const grpc::internal::RpcMethod push_dense_method_;

  absl::Mutex mu_;
  std::deque<std::function<void()>> queued_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_GRPC_TRANSPORT_H_
