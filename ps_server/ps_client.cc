#include "ps_server/ps_client.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/byte_codec.h"
#include "common/data_plane/socket.h"
#include "common/grpc_channel.h"
#include "common/grpc_status.h"
#include "common/tensor_chunk_codec.h"
#include "glog/logging.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/sync_stream.h"
#include "ps_server/push_size.h"

namespace tessera {

PsClient::PsClient(std::string address, int task_index,
                   std::shared_ptr<grpc::Channel> channel,
                   PsClientOptions options)
    : address_(std::move(address)),
      task_index_(task_index),
      options_(options),
      channel_(channel),
      stub_(ParameterServer::NewStub(channel)),
      pull_dense_method_("/tessera.ParameterServer/PullDense",
                         grpc::internal::RpcMethod::SERVER_STREAMING, channel),
      push_dense_method_("/tessera.ParameterServer/PushDense",
                         grpc::internal::RpcMethod::CLIENT_STREAMING, channel) {
}

std::string PsClient::Peer(const char* call) const {
  return absl::StrCat("ps ", task_index_, " (", address_, ") ", call);
}

absl::StatusOr<int> PsClient::DataPlanePort() {
  HealthResponse health;
  if (absl::Status s = Health(&health); !s.ok()) return s;
  return health.data_plane_port();
}

absl::StatusOr<DensePlaneClient*> PsClient::Plane() {
  if (options_.data_plane != DataPlaneKind::kTcp) return nullptr;
  absl::MutexLock lock(&plane_mu_);
  if (plane_known_) return plane_.get();
  absl::StatusOr<int> port = DataPlanePort();
  if (!port.ok()) return port.status();
  std::shared_ptr<const DataPlaneTls> tls;
  if (options_.tls.has_value()) {
    absl::StatusOr<std::shared_ptr<const DataPlaneTls>> made =
        DataPlaneTls::Create(*options_.tls, DataPlaneTls::Role::kClient);
    if (!made.ok()) return made.status();
    tls = *std::move(made);
  }
  plane_known_ = true;
  std::string host;
  int grpc_port = 0;
  if (*port <= 0 || !SplitHostPort(address_, &host, &grpc_port).ok()) {
    LOG(WARNING) << "ps " << task_index_ << " (" << address_
                 << ") announces no TCP data plane (an older server); its "
                    "dense tensors travel over gRPC";
    return nullptr;
  }
  DensePlaneClientOptions options;
  options.tls = std::move(tls);
  options.tls_server_name = options_.tls_target_name_override;
  options.host = host;
  options.resolve_port = [this] { return DataPlanePort(); };
  options.job_token = options_.job_token;
  options.timeout_s = options_.timeout_s;
  options.peer = absl::StrCat("ps ", task_index_, " (", address_, ")");
  // Rows get connections of their own: a worker's row and dense calls of
  // one step run at once.
  row_plane_ = std::make_unique<RowPlaneClient>(options);
  plane_ = std::make_unique<DensePlaneClient>(std::move(options));
  return plane_.get();
}

absl::StatusOr<RowPlaneClient*> PsClient::RowPlane() {
  absl::StatusOr<DensePlaneClient*> dense = Plane();
  if (!dense.ok()) return dense.status();
  if (*dense == nullptr) return nullptr;
  absl::MutexLock lock(&plane_mu_);
  return row_plane_.get();
}

absl::Status PsClient::CreateShards(const CreateShardsRequest& request,
                                    CreateShardsResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  return FromGrpcStatus(stub_->CreateShards(&context, request, response),
                        Peer("CreateShards"));
}

absl::Status PsClient::PullDense(absl::Span<const std::string> shards,
                                 absl::Span<const absl::Span<float>> out,
                                 std::vector<int64_t>* versions,
                                 std::optional<int64_t> sync_step) {
  if (shards.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Peer("PullDense"), ": ", shards.size(), " shards but ",
                     out.size(), " destinations"));
  }
  absl::StatusOr<DensePlaneClient*> plane = Plane();
  if (!plane.ok()) return plane.status();
  if (*plane != nullptr) {
    return (*plane)->PullDense(shards, out, versions, sync_step);
  }
  PullRequest request;
  for (const std::string& s : shards) request.add_shards(s);
  if (versions != nullptr) versions->assign(shards.size(), 0);

  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  if (sync_step.has_value()) AttachSyncPull(*sync_step, &context);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel_.get(), pull_dense_method_, &context, request));
  grpc::ByteBuffer message;
  TensorChunkParser parser;  // reused, so its vectors are allocated once
  size_t index = 0;
  int64_t received = 0;
  bool started = false;
  absl::Status bad;
  while (reader->Read(&message)) {
    if (absl::Status s = parser.Parse(message); !s.ok()) {
      bad = absl::InternalError(
          absl::StrCat(Peer("PullDense"), ": ", s.message()));
      context.TryCancel();
      break;
    }
    const TensorChunkView& chunk = parser.chunk();
    const TensorChunkHeader& header = chunk.header;
    if (started && header.offset == 0) {
      ++index;
      received = 0;
    }
    started = true;
    if (index >= shards.size() || header.name != shards[index]) {
      bad = absl::InternalError(absl::StrCat(
          Peer("PullDense"), ": unexpected chunk of ", header.name));
      context.TryCancel();
      break;
    }
    const int64_t capacity = out[index].size() * sizeof(float);
    if (header.total_bytes != capacity) {
      bad = absl::InvalidArgumentError(absl::StrCat(
          Peer("PullDense"), ": wrong shape: shard ", header.name, " has ",
          header.total_bytes, " bytes, the destination ", capacity));
      context.TryCancel();
      break;
    }
    if (header.offset != received || received + chunk.data_bytes > capacity) {
      bad = absl::InternalError(absl::StrCat(
          Peer("PullDense"), ": chunk of ", header.name, " at byte ",
          header.offset, " does not follow byte ", received));
      context.TryCancel();
      break;
    }
    // The one copy: from gRPC's receive slices into the caller's buffer.
    chunk.CopyDataTo(reinterpret_cast<char*>(out[index].data()) + received);
    received += chunk.data_bytes;
    if (versions != nullptr) (*versions)[index] = header.version;
    parser.Clear();
  }
  parser.Clear();
  grpc::Status status = reader->Finish();
  if (!bad.ok()) return bad;
  if (!status.ok()) return FromGrpcStatus(status, Peer("PullDense"));
  if (shards.empty()) return absl::OkStatus();
  if (index + 1 != shards.size() ||
      received != static_cast<int64_t>(out[index].size() * sizeof(float))) {
    return absl::DataLossError(
        absl::StrCat(Peer("PullDense"), ": stream ended early"));
  }
  return absl::OkStatus();
}

namespace {

// Counts the gRPC slices that reference a caller's memory. gRPC may hold a
// sent slice after the write that carried it completed (until the bytes
// are in the socket), so memory lent to it is only free again once the
// slice's destroy callback ran.
class LentMemory {
 public:
  LentMemory() = default;
  LentMemory(const LentMemory&) = delete;
  LentMemory& operator=(const LentMemory&) = delete;
  ~LentMemory() { WaitUntilReturned(); }

  // A slice over bytes [data, data + size) that gRPC may keep and send
  // from; sub-slices share its count. REQUIRES: size > 0.
  grpc::Slice Lend(const void* data, size_t size) {
    absl::MutexLock lock(&mu_);
    ++lent_;
    return grpc::Slice(const_cast<void*>(data), size, &LentMemory::Returned,
                       this);
  }

  // Blocks until gRPC dropped every slice from Lend(). Once the call is
  // over that is immediate in practice: the last bytes are in the socket.
  void WaitUntilReturned() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* lent) { return *lent == 0; }, &lent_));
  }

 private:
  static void Returned(void* self) {
    LentMemory* lent = static_cast<LentMemory*>(self);
    absl::MutexLock lock(&lent->mu_);
    --lent->lent_;
  }

  absl::Mutex mu_;
  int lent_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

absl::Status PsClient::PushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  if (shards.size() != grads.size() ||
      (!base_versions.empty() && base_versions.size() != shards.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        Peer("PushDense"), ": ", shards.size(), " shards, ", grads.size(),
        " gradients and ", base_versions.size(), " versions"));
  }
  absl::StatusOr<DensePlaneClient*> plane = Plane();
  if (!plane.ok()) return plane.status();
  if (*plane != nullptr) {
    return (*plane)->PushDense(shards, grads, base_versions, response, sync);
  }
  // Declared first, so it is destroyed (and waits) after the call.
  LentMemory lent;
  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  if (sync != nullptr) AttachSyncPush(*sync, &context);
  PushSize size{static_cast<int64_t>(shards.size()), 0};
  for (absl::Span<const float> g : grads) {
    size.bytes += static_cast<int64_t>(g.size() * sizeof(float));
  }
  DeclarePushSize(size, &context);
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
          channel_.get(), push_dense_method_, &context, response));
  // Whole floats per chunk: the server refuses a chunk that splits one.
  const int64_t chunk_bytes = std::max<int64_t>(
      sizeof(float), options_.chunk_bytes / sizeof(float) * sizeof(float));
  TensorChunkHeader header;
  for (size_t i = 0; i < shards.size(); ++i) {
    const int64_t total = grads[i].size() * sizeof(float);
    header.name = shards[i];
    header.total_bytes = total;
    header.version = base_versions.empty() ? 0 : base_versions[i];
    // Each chunk is a small header slice plus a sub-slice of this one: the
    // gradient is sent from the caller's memory, not copied.
    const grpc::Slice gradient =
        total > 0 ? lent.Lend(grads[i].data(), total) : grpc::Slice();
    bool write_failed = false;
    int64_t offset = 0;
    do {
      const int64_t length = std::min(chunk_bytes, total - offset);
      header.offset = offset;
      if (!writer->Write(MakeTensorChunkBuffer(
              header, gradient.sub(offset, offset + length)))) {
        write_failed = true;  // the server ended the call; Finish says why
        break;
      }
      offset += length;
    } while (offset < total);
    if (write_failed) break;
  }
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish(), Peer("PushDense"));
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
  absl::StatusOr<RowPlaneClient*> plane = RowPlane();
  if (!plane.ok()) return plane.status();
  if (*plane != nullptr) {
    const RowsPart part{shard, row_elements, ids};
    const absl::Span<float> spans[1] = {out};
    return (*plane)->PullRows({&part, 1}, spans, sync_step);
  }
  PullRowsRequest request;
  request.set_shard(shard);
  AppendRaw(ids, request.mutable_ids());
  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  if (sync_step.has_value()) AttachSyncPull(*sync_step, &context);
  std::unique_ptr<grpc::ClientReader<RowsChunk>> reader =
      stub_->PullRows(&context, request);
  RowsChunk chunk;
  int64_t rows_received = 0;
  absl::Status bad;
  while (reader->Read(&chunk)) {
    const int64_t n = chunk.values().size() / sizeof(float) /
                      std::max<int64_t>(1, row_elements);
    if (chunk.row_elements() != row_elements ||
        chunk.first() != rows_received ||
        rows_received + n > static_cast<int64_t>(ids.size())) {
      bad = absl::InvalidArgumentError(absl::StrCat(
          Peer("PullRows"), ": wrong shape: shard ", shard, " rows have ",
          chunk.row_elements(), " elements, expected ", row_elements));
      context.TryCancel();
      break;
    }
    if (!chunk.values().empty()) {
      std::memcpy(out.data() + rows_received * row_elements,
                  chunk.values().data(), chunk.values().size());
    }
    rows_received += n;
  }
  grpc::Status status = reader->Finish();
  if (!bad.ok()) return bad;
  if (!status.ok()) return FromGrpcStatus(status, Peer("PullRows"));
  if (rows_received != static_cast<int64_t>(ids.size())) {
    return absl::DataLossError(absl::StrCat(Peer("PullRows"), ": got ",
                                            rows_received, " of ", ids.size(),
                                            " rows"));
  }
  return absl::OkStatus();
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
  absl::StatusOr<RowPlaneClient*> plane = RowPlane();
  if (!plane.ok()) return plane.status();
  if (*plane != nullptr) {
    const RowsPart part{shard, row_elements, ids};
    const absl::Span<const float> spans[1] = {grads};
    return (*plane)->PushRows({&part, 1}, spans, response, sync);
  }
  grpc::ClientContext context;
  SetDeadline(&context, options_.timeout_s);
  if (sync != nullptr) AttachSyncPush(*sync, &context);
  DeclarePushSize({static_cast<int64_t>(ids.size()),
                   static_cast<int64_t>(grads.size() * sizeof(float))},
                  &context);
  std::unique_ptr<grpc::ClientWriter<RowsChunk>> writer =
      stub_->PushRows(&context, response);
  const int64_t rows_per_chunk = std::max<int64_t>(
      1, options_.chunk_bytes /
             std::max<int64_t>(1, row_elements * sizeof(float)));
  RowsChunk chunk;
  chunk.set_name(shard);
  chunk.set_row_elements(row_elements);
  int64_t next = 0;
  const int64_t total = static_cast<int64_t>(ids.size());
  do {
    const int64_t n = std::min(rows_per_chunk, total - next);
    chunk.set_first(next);
    chunk.clear_ids();
    AppendRaw(ids.subspan(next, n), chunk.mutable_ids());
    chunk.clear_values();
    AppendRaw(grads.subspan(next * row_elements, n * row_elements),
              chunk.mutable_values());
    if (!writer->Write(chunk)) break;
    next += n;
  } while (next < total);
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish(), Peer("PushRows"));
}

absl::Status PsClient::PullRows(absl::Span<const RowsPart> parts,
                                absl::Span<const absl::Span<float>> out,
                                std::optional<int64_t> sync_step) {
  if (parts.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Peer("PullRows"), ": ", parts.size(), " shards but ",
                     out.size(), " destinations"));
  }
  absl::StatusOr<RowPlaneClient*> plane = RowPlane();
  if (!plane.ok()) return plane.status();
  if (*plane != nullptr) return (*plane)->PullRows(parts, out, sync_step);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (absl::Status s = PullRows(std::string(parts[i].shard), parts[i].ids,
                                  parts[i].row_elements, out[i], sync_step);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::PushRows(absl::Span<const RowsPart> parts,
                                absl::Span<const absl::Span<const float>> grads,
                                PushResponse* response, const SyncPush* sync) {
  if (parts.size() != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat(Peer("PushRows"), ": ",
                                                   parts.size(), " shards but ",
                                                   grads.size(), " gradients"));
  }
  absl::StatusOr<RowPlaneClient*> plane = RowPlane();
  if (!plane.ok()) return plane.status();
  if (*plane != nullptr) {
    return (*plane)->PushRows(parts, grads, response, sync);
  }
  response->Clear();
  for (size_t i = 0; i < parts.size(); ++i) {
    PushResponse one;
    if (absl::Status s = PushRows(std::string(parts[i].shard), parts[i].ids,
                                  parts[i].row_elements, grads[i], &one, sync);
        !s.ok()) {
      return s;
    }
    response->MergeFrom(one);
  }
  return absl::OkStatus();
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
