#ifndef TESSERA_PS_SERVER_CLIENT_PS_CLIENT_H_
#define TESSERA_PS_SERVER_CLIENT_PS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/data_plane/data_plane_kind.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/transport_limits.h"
#include "grpcpp/channel.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps_server/client/ps_transport.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

struct PsClientOptions {
  int64_t chunk_bytes = kDefaultChunkBytes;  // largest chunk pushed
  double timeout_s = kDefaultRpcTimeoutS;    // of every call
  // The transport of data calls (ps_transport.h). kTcp: dense and row
  // pulls and pushes travel on the server's TCP data plane
  // (ps_server/data_plane/), which its Health announces; a server that
  // announces none is still reached over gRPC. kGrpc: gRPC only.
  DataPlaneKind data_plane = DataPlaneKind::kGrpc;
  // The job's token, proven on the data plane's connections (the channel
  // carries it for gRPC calls); empty: none.
  std::string job_token;
  // The data plane's connections run TLS with the job's files, checking
  // the server's certificate against the name the channel checks: the
  // address's host, or `tls_target_name_override` (the channel's
  // ChannelSecurity holds the same two); nullopt: plain TCP.
  std::optional<TlsFiles> tls;
  std::string tls_target_name_override;
};

// A blocking client of one parameter server, used by workers, the
// coordinator and the benches. Errors name the server and the call. It
// picks the transport of data calls once (at the first one, asking the
// server's Health when the options ask for the data plane) and hides it:
// callers make the same calls whichever it is.
//
// Thread safety: methods may be called concurrently (gRPC stubs are
// thread-safe); each call owns its own buffers.
class PsClient {
 public:
  PsClient(std::string address, int task_index,
           std::shared_ptr<grpc::Channel> channel,
           PsClientOptions options = {});

  const std::string& address() const { return address_; }
  int task_index() const { return task_index_; }

  absl::Status CreateShards(const CreateShardsRequest& request,
                            CreateShardsResponse* response);

  // Pulls shards[i] into out[i]. Each destination must be exactly the
  // shard's size, so values land in the caller's buffer with one copy
  // (none in user space on the data plane).
  // `versions` (optional) receives each shard's version. `sync_step`: sync
  // mode's step the pull reads for (sync_push.h).
  absl::Status PullDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<float>> out,
                         std::vector<int64_t>* versions,
                         std::optional<int64_t> sync_step = std::nullopt);

  // Pushes the gradient of shards[i] from grads[i], computed from version
  // base_versions[i] (empty: 0). All are applied, or none on error. The
  // bytes are sent from `grads` itself, without a copy; the call returns
  // once the transport no longer refers to them.
  absl::Status PushDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<const float>> grads,
                         absl::Span<const int64_t> base_versions,
                         PushResponse* response,
                         const SyncPush* sync = nullptr);

  // The same dense calls in two halves, so that one thread can have a
  // call in flight at every parameter server at once (a step's pull from
  // each): Begin* starts the call, the Pending's Finish returns the whole
  // call's result. Every argument must stay valid (and `grads` unchanged)
  // until Finish returns.
  using Pending = PsTransport::Pending;
  std::unique_ptr<Pending> BeginPullDense(
      absl::Span<const std::string> shards,
      absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
      std::optional<int64_t> sync_step = std::nullopt);
  std::unique_ptr<Pending> BeginPushDense(
      absl::Span<const std::string> shards,
      absl::Span<const absl::Span<const float>> grads,
      absl::Span<const int64_t> base_versions, PushResponse* response,
      const SyncPush* sync = nullptr);

  // Pulls the rows `ids` (ids of the whole variable) of one shard into
  // `out`, ids.size() * row_elements floats.
  absl::Status PullRows(const std::string& shard, absl::Span<const int64_t> ids,
                        int64_t row_elements, absl::Span<float> out,
                        std::optional<int64_t> sync_step = std::nullopt);

  // Pushes row gradients (ids.size() rows of row_elements) of one shard;
  // with `sync`, as a part of a sync step (no rows is a part too).
  absl::Status PushRows(const std::string& shard, absl::Span<const int64_t> ids,
                        int64_t row_elements, absl::Span<const float> grads,
                        PushResponse* response, const SyncPush* sync = nullptr);

  // The same for the rows of several shards: one round trip on the data
  // plane, one call per shard on gRPC (where a push of several shards is
  // then not all-or-nothing across them: each shard's is).
  absl::Status PullRows(absl::Span<const RowsPart> parts,
                        absl::Span<const absl::Span<float>> out,
                        std::optional<int64_t> sync_step = std::nullopt);
  absl::Status PushRows(absl::Span<const RowsPart> parts,
                        absl::Span<const absl::Span<const float>> grads,
                        PushResponse* response, const SyncPush* sync = nullptr);

  // Checkpoints (ps_server/shard_checkpoint.h). A save or restore moves
  // the server's whole state through the file system, so the deadline is
  // at least kCheckpointTimeoutS whatever the client's timeout.
  static constexpr double kCheckpointTimeoutS = 600;
  absl::Status SaveShards(const SaveShardsRequest& request,
                          SaveShardsResponse* response, double timeout_s = 0);
  absl::Status RestoreShards(const RestoreShardsRequest& request,
                             RestoreShardsResponse* response,
                             double timeout_s = 0);

  absl::Status Health(HealthResponse* response, double timeout_s = 0);
  absl::Status Shutdown(const std::string& reason);
  // Global-norm clipping of a complete sync step (ps_service.proto
  // StepNorm).
  absl::Status StepNorm(const StepNormRequest& request,
                        StepNormResponse* response);

 private:
  std::string Peer(const char* call) const;
  // InvalidArgument naming a part whose precision is not a RowPrecision.
  absl::Status CheckRowPrecisions(const char* call,
                                  absl::Span<const RowsPart> parts) const;
  // The transport of data calls, picked at the first: gRPC unless the
  // options ask for the data plane and the server announces one. Asks
  // Health once; its error (the server is down) is the call's.
  absl::StatusOr<PsTransport*> Transport();
  absl::StatusOr<int> DataPlanePort();
  absl::Status CheckPullDense(absl::Span<const std::string> shards,
                              absl::Span<const absl::Span<float>> out) const;
  absl::Status CheckPushDense(absl::Span<const std::string> shards,
                              absl::Span<const absl::Span<const float>> grads,
                              absl::Span<const int64_t> base_versions) const;

  const std::string address_;
  const int task_index_;
  const PsClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ParameterServer::Stub> stub_;
  const std::unique_ptr<PsTransport> grpc_;  // data calls off the plane

  absl::Mutex transport_mu_;
  PsTransport* transport_ ABSL_GUARDED_BY(transport_mu_) = nullptr;
  std::unique_ptr<PsTransport> plane_ ABSL_GUARDED_BY(transport_mu_);
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_PS_CLIENT_H_
