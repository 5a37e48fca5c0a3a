#include "ps_server/client/ps_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "ps_server/client/grpc_transport.h"
#include "ps_server/client/plane_transport.h"

namespace tessera {
namespace {

GrpcTransportOptions GrpcOptions(const PsClientOptions& options,
                                 const std::string& peer) {
  GrpcTransportOptions out;
  out.chunk_bytes = options.chunk_bytes;
  out.timeout_s = options.timeout_s;
  out.peer = peer;
  return out;
}

}  // namespace

PsClient::PsClient(std::string address, int task_index,
                   std::shared_ptr<grpc::Channel> channel,
                   PsClientOptions options)
    : address_(std::move(address)),
      task_index_(task_index),
      options_(options),
      channel_(channel),
      stub_(ParameterServer::NewStub(channel)),
      grpc_(std::make_unique<GrpcTransport>(
          channel, GrpcOptions(options_, absl::StrCat("ps ", task_index_, " (",
                                                      address_, ")")))) {}

std::string PsClient::Peer(const char* call) const {
  return absl::StrCat("ps ", task_index_, " (", address_, ") ", call);
}

absl::StatusOr<int> PsClient::DataPlanePort() {
  HealthResponse health;
  if (absl::Status s = Health(&health); !s.ok()) return s;
  return health.data_plane_port();
}

absl::StatusOr<PsTransport*> PsClient::Transport() {
  if (options_.data_plane != DataPlaneKind::kTcp) return grpc_.get();
  absl::MutexLock lock(&transport_mu_);
  if (transport_ != nullptr) return transport_;
  absl::StatusOr<int> port = DataPlanePort();
  if (!port.ok()) return port.status();
  std::shared_ptr<const DataPlaneTls> tls;
  if (options_.tls.has_value()) {
    absl::StatusOr<std::shared_ptr<const DataPlaneTls>> made =
        DataPlaneTls::Create(*options_.tls, DataPlaneTls::Role::kClient);
    if (!made.ok()) return made.status();
    tls = *std::move(made);
  }
  std::string host;
  int grpc_port = 0;
  if (*port <= 0 || !SplitHostPort(address_, &host, &grpc_port).ok()) {
    LOG(WARNING) << "ps " << task_index_ << " (" << address_
                 << ") announces no TCP data plane (an older server); its "
                    "dense tensors travel over gRPC";
    transport_ = grpc_.get();
    return transport_;
  }
  PlaneConnectionOptions options;
  options.tls = std::move(tls);
  options.tls_server_name = options_.tls_target_name_override;
  options.host = host;
  options.resolve_port = [this] { return DataPlanePort(); };
  options.job_token = options_.job_token;
  options.timeout_s = options_.timeout_s;
  options.peer = absl::StrCat("ps ", task_index_, " (", address_, ")");
  plane_ = std::make_unique<PlaneTransport>(options);
  transport_ = plane_.get();
  return transport_;
}

absl::Status PsClient::CreateShards(const CreateShardsRequest& request,
                                    CreateShardsResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  return FromGrpcStatus(stub_->CreateShards(&context, request, response),
                        Peer("CreateShards"));
}

absl::Status PsClient::CheckPullDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out) const {
  if (shards.size() == out.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(Peer("PullDense"), ": ",
                                                 shards.size(), " shards but ",
                                                 out.size(), " destinations"));
}

absl::Status PsClient::CheckPushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions) const {
  if (shards.size() == grads.size() &&
      (base_versions.empty() || base_versions.size() == shards.size())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      Peer("PushDense"), ": ", shards.size(), " shards, ", grads.size(),
      " gradients and ", base_versions.size(), " versions"));
}

absl::Status PsClient::PullDense(absl::Span<const std::string> shards,
                                 absl::Span<const absl::Span<float>> out,
                                 std::vector<int64_t>* versions,
                                 std::optional<int64_t> sync_step) {
  if (absl::Status s = CheckPullDense(shards, out); !s.ok()) return s;
  absl::StatusOr<PsTransport*> transport = Transport();
  if (!transport.ok()) return transport.status();
  return (*transport)->PullDense(shards, out, versions, sync_step);
}

absl::Status PsClient::PushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  if (absl::Status s = CheckPushDense(shards, grads, base_versions); !s.ok()) {
    return s;
  }
  absl::StatusOr<PsTransport*> transport = Transport();
  if (!transport.ok()) return transport.status();
  return (*transport)->PushDense(shards, grads, base_versions, response, sync);
}

std::unique_ptr<PsClient::Pending> PsClient::BeginPullDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
    std::optional<int64_t> sync_step) {
  if (absl::Status s = CheckPullDense(shards, out); !s.ok()) {
    return std::make_unique<FailedPending>(std::move(s));
  }
  absl::StatusOr<PsTransport*> transport = Transport();
  if (!transport.ok()) {
    return std::make_unique<FailedPending>(transport.status());
  }
  return (*transport)->BeginPullDense(shards, out, versions, sync_step);
}

std::unique_ptr<PsClient::Pending> PsClient::BeginPushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  if (absl::Status s = CheckPushDense(shards, grads, base_versions); !s.ok()) {
    return std::make_unique<FailedPending>(std::move(s));
  }
  absl::StatusOr<PsTransport*> transport = Transport();
  if (!transport.ok()) {
    return std::make_unique<FailedPending>(transport.status());
  }
  return (*transport)
      ->BeginPushDense(shards, grads, base_versions, response, sync);
}

absl::Status PsClient::PullRows(const std::string& shard,
                                absl::Span<const int64_t> ids,
                                int64_t row_elements, absl::Span<float> out,
                                std::optional<int64_t> sync_step) {
  if (out.size() != ids.size() * row_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        Peer("PullRows"), ": ", ids.size(), " rows of ", row_elements,
        " floats do not fit a destination of ", out.size()));
  }
  const RowsPart part{shard, row_elements, ids};
  const absl::Span<float> spans[1] = {out};
  return PullRows({&part, 1}, spans, sync_step);
}

absl::Status PsClient::PushRows(const std::string& shard,
                                absl::Span<const int64_t> ids,
                                int64_t row_elements,
                                absl::Span<const float> grads,
                                PushResponse* response, const SyncPush* sync) {
  if (grads.size() != ids.size() * row_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(Peer("PushRows"), ": ", ids.size(), " ids of ",
                     row_elements, " floats need ", ids.size() * row_elements,
                     " values, got ", grads.size()));
  }
  const RowsPart part{shard, row_elements, ids};
  const absl::Span<const float> spans[1] = {grads};
  return PushRows({&part, 1}, spans, response, sync);
}

absl::Status PsClient::CheckRowPrecisions(
    const char* call, absl::Span<const RowsPart> parts) const {
  for (const RowsPart& part : parts) {
    if (!RowPrecision_IsValid(part.precision)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Peer(call), ": shard ", part.shard, ": precision ",
                       part.precision, " is not fp32, fp16 or bf16"));
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::PullRows(absl::Span<const RowsPart> parts,
                                absl::Span<const absl::Span<float>> out,
                                std::optional<int64_t> sync_step) {
  if (parts.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Peer("PullRows"), ": ", parts.size(), " shards but ",
                     out.size(), " destinations"));
  }
  if (absl::Status s = CheckRowPrecisions("PullRows", parts); !s.ok()) {
    return s;
  }
  absl::StatusOr<PsTransport*> transport = Transport();
  if (!transport.ok()) return transport.status();
  return (*transport)->PullRows(parts, out, sync_step);
}

absl::Status PsClient::PushRows(absl::Span<const RowsPart> parts,
                                absl::Span<const absl::Span<const float>> grads,
                                PushResponse* response, const SyncPush* sync) {
  if (parts.size() != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat(Peer("PushRows"), ": ",
                                                   parts.size(), " shards but ",
                                                   grads.size(), " gradients"));
  }
  if (absl::Status s = CheckRowPrecisions("PushRows", parts); !s.ok()) {
    return s;
  }
  absl::StatusOr<PsTransport*> transport = Transport();
  if (!transport.ok()) return transport.status();
  return (*transport)->PushRows(parts, grads, response, sync);
}

namespace {

// The deadline of a checkpoint call: the longest of the call's, the
// client's and the floor.
double CheckpointDeadline(double call_s, double client_s) {
  return std::max({call_s, client_s, PsClient::kCheckpointTimeoutS});
}

}  // namespace

absl::Status PsClient::SaveShards(const SaveShardsRequest& request,
                                  SaveShardsResponse* response,
                                  double timeout_s) {
  grpc::ClientContext context;
  SetDeadline(&context, CheckpointDeadline(timeout_s, options_.timeout_s));
  return FromGrpcStatus(stub_->SaveShards(&context, request, response),
                        Peer("SaveShards"));
}

absl::Status PsClient::RestoreShards(const RestoreShardsRequest& request,
                                     RestoreShardsResponse* response,
                                     double timeout_s) {
  grpc::ClientContext context;
  SetDeadline(&context, CheckpointDeadline(timeout_s, options_.timeout_s));
  return FromGrpcStatus(stub_->RestoreShards(&context, request, response),
                        Peer("RestoreShards"));
}

absl::Status PsClient::Health(HealthResponse* response, double timeout_s) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_s > 0 ? timeout_s : options_.timeout_s);
  return FromGrpcStatus(stub_->Health(&context, HealthRequest(), response),
                        Peer("Health"));
}

absl::Status PsClient::StepNorm(const StepNormRequest& request,
                                StepNormResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  return FromGrpcStatus(stub_->StepNorm(&context, request, response),
                        Peer("StepNorm"));
}

absl::Status PsClient::Shutdown(const std::string& reason) {
  grpc::ClientContext context;
  SetDeadline(&context, 10);
  ShutdownRequest request;
  request.set_reason(reason);
  ShutdownResponse response;
  return FromGrpcStatus(stub_->Shutdown(&context, request, &response),
                        Peer("Shutdown"));
}

}  // namespace tessera
