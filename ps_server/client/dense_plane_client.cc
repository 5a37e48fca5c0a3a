#include "ps_server/client/dense_plane_client.h"

#include "absl/strings/str_cat.h"
#include "common/data_plane/frame.h"
#include "ps_server/wire/dense_wire.h"

namespace tessera {

DensePlaneClient::DensePlaneClient(DensePlaneClientOptions options)
    : owned_(std::make_shared<PlaneConnections>(std::move(options))),
      connections_(*owned_) {}

DensePlaneClient::DensePlaneClient(
    std::shared_ptr<PlaneConnections> connections)
    : owned_(std::move(connections)), connections_(*owned_) {}

absl::Status DensePlaneClient::CheckPullSizes(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out) const {
  if (shards.size() == out.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(connections_.peer(), " PullDense: ", shards.size(),
                   " shards but ", out.size(), " destinations"));
}

absl::Status DensePlaneClient::PullDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
    std::optional<int64_t> sync_step) {
  // Refused before anything is sent.
  if (absl::Status s = CheckPullSizes(shards, out); !s.ok()) return s;
  return FinishPullDense(BeginPullDense(shards, sync_step), shards, out,
                         versions);
}

DensePlaneClient::Pending DensePlaneClient::BeginPullDense(
    absl::Span<const std::string> shards, std::optional<int64_t> sync_step) {
  absl::StatusOr<PlaneLease> socket = Acquire();
  if (!socket.ok()) return Pending(Prefixed("PullDense", socket.status()));
  std::string table;
  for (const std::string& name : shards) AppendString16(name, &table);
  FrameHeader request;
  request.op = FrameOp::kPullDense;
  request.count = static_cast<uint32_t>(shards.size());
  request.bytes = static_cast<int64_t>(table.size());
  TagSyncPull(sync_step, &request);
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(request, head);
  const iovec parts[2] = {{head, sizeof(head)}, {table.data(), table.size()}};
  if (absl::Status s = socket->WriteAll(parts); !s.ok()) {
    return Pending(Prefixed("PullDense", s));
  }
  return Pending(std::move(socket));
}

absl::Status DensePlaneClient::FinishPullDense(
    Pending call, absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions) {
  if (absl::Status s = CheckPullSizes(shards, out); !s.ok()) return s;
  if (versions != nullptr) versions->assign(shards.size(), 0);
  if (!call.socket_.ok()) return call.socket_.status();
  absl::StatusOr<PlaneLease>& socket = call.socket_;
  FrameHeader reply;
  if (absl::Status s =
          ReadReplyHeader(*socket, FrameOp::kPullDenseReply, &reply);
      !s.ok()) {
    // An error reply leaves the connection in step; a broken one does not.
    if (reply.code != 0 && reply.op == FrameOp::kPullDenseReply) {
      Release(*std::move(socket));
    }
    return Prefixed("PullDense", s);
  }
  if (reply.count != shards.size()) {
    return Prefixed("PullDense", absl::InternalError(absl::StrCat(
                                     "the reply holds ", reply.count,
                                     " shards, not ", shards.size())));
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    char part[kDensePartHeaderBytes];
    if (absl::Status s = socket->ReadFull(part, sizeof(part)); !s.ok()) {
      return Prefixed("PullDense", s);
    }
    int64_t version, bytes;
    DecodeDensePartHeader(part, &version, &bytes);
    const int64_t capacity =
        static_cast<int64_t>(out[i].size() * sizeof(float));
    if (bytes != capacity) {
      // The rest of the reply is not read: the connection is dropped.
      return Prefixed("PullDense",
                      absl::InvalidArgumentError(absl::StrCat(
                          "wrong shape: shard ", shards[i], " has ", bytes,
                          " bytes, the "
                          "destination ",
                          capacity)));
    }
    // The one copy: the kernel's, into the caller's buffer.
    if (absl::Status s = socket->ReadFull(out[i].data(), bytes); !s.ok()) {
      return Prefixed("PullDense", s);
    }
    if (versions != nullptr) (*versions)[i] = version;
  }
  Release(*std::move(socket));
  return absl::OkStatus();
}

absl::Status DensePlaneClient::PushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  return FinishPushDense(BeginPushDense(shards, grads, base_versions, sync),
                         response);
}

DensePlaneClient::Pending DensePlaneClient::BeginPushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, const SyncPush* sync) {
  if (shards.size() != grads.size() ||
      (!base_versions.empty() && base_versions.size() != shards.size())) {
    return Pending(absl::InvalidArgumentError(absl::StrCat(
        connections_.peer(), " PushDense: ", shards.size(), " shards, ",
        grads.size(), " gradients and ", base_versions.size(), " versions")));
  }
  absl::StatusOr<PlaneLease> socket = Acquire();
  if (!socket.ok()) return Pending(Prefixed("PushDense", socket.status()));
  std::string table;
  for (size_t i = 0; i < shards.size(); ++i) {
    AppendString16(shards[i], &table);
    AppendInt64(base_versions.empty() ? 0 : base_versions[i], &table);
    AppendInt64(static_cast<int64_t>(grads[i].size() * sizeof(float)), &table);
  }
  FrameHeader request;
  request.op = FrameOp::kPushDense;
  request.count = static_cast<uint32_t>(shards.size());
  request.bytes = static_cast<int64_t>(table.size());
  TagSyncPush(sync, &request);
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(request, head);
  std::vector<iovec> parts;
  parts.reserve(2 + grads.size());
  parts.push_back({head, sizeof(head)});
  parts.push_back({table.data(), table.size()});
  for (absl::Span<const float> g : grads) {
    parts.push_back({const_cast<float*>(g.data()), g.size() * sizeof(float)});
  }
  if (absl::Status s = socket->WriteAll(parts); !s.ok()) {
    return Pending(Prefixed("PushDense", s));
  }
  return Pending(std::move(socket));
}

absl::Status DensePlaneClient::FinishPushDense(Pending call,
                                               PushResponse* response) {
  if (!call.socket_.ok()) return call.socket_.status();
  absl::StatusOr<PlaneLease>& socket = call.socket_;
  FrameHeader reply;
  if (absl::Status s =
          ReadReplyHeader(*socket, FrameOp::kPushDenseReply, &reply);
      !s.ok()) {
    if (reply.code != 0 && reply.op == FrameOp::kPushDenseReply) {
      Release(*std::move(socket));
    }
    return Prefixed("PushDense", s);
  }
  if (reply.bytes > kMaxFrameTableBytes) {
    return Prefixed("PushDense", absl::InternalError("the reply is too long"));
  }
  std::string bytes(reply.bytes, '\0');
  if (absl::Status s = socket->ReadFull(bytes.data(), bytes.size()); !s.ok()) {
    return Prefixed("PushDense", s);
  }
  if (!response->ParseFromString(bytes)) {
    return Prefixed("PushDense",
                    absl::InternalError("the reply is not a PushResponse"));
  }
  Release(*std::move(socket));
  return absl::OkStatus();
}

}  // namespace tessera
