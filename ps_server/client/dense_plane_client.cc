#include "ps_server/client/dense_plane_client.h"

#include "absl/strings/str_cat.h"
#include "common/data_plane/frame.h"
#include "ps_server/client/plane_replies.h"
#include "ps_server/wire/dense_wire.h"

namespace tessera {
namespace {

// A pull's reply, each shard's values straight into out[i].
PlaneReply ReadPullReply(Socket& socket, bool discard,
                         absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<float>> out,
                         std::vector<int64_t>* versions) {
  if (PlaneReply r =
          ReadPlanePullHeader(socket, FrameOp::kPullDenseReply, out.size());
      !r.status.ok()) {
    return r;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t version, bytes;
    if (PlaneReply r = ReadPlanePart(socket, discard, &version, &bytes);
        !r.status.ok()) {
      return r;
    }
    if (discard) continue;
    const int64_t capacity =
        static_cast<int64_t>(out[i].size() * sizeof(float));
    if (bytes != capacity) {
      // The rest of the reply is not read: the connection is dropped.
      return {absl::InvalidArgumentError(
                  absl::StrCat("wrong shape: shard ", shards[i], " has ", bytes,
                               " bytes, the destination ", capacity)),
              false};
    }
    // The one copy: the kernel's, into the caller's buffer.
    if (absl::Status s = socket.ReadFull(out[i].data(), bytes); !s.ok()) {
      return {s, false};
    }
    if (versions != nullptr) (*versions)[i] = version;
  }
  return {};
}

}  // namespace

DensePlaneClient::DensePlaneClient(DensePlaneClientOptions options)
    : owned_(std::make_shared<PlaneConnections>(std::move(options))),
      connections_(*owned_) {}

DensePlaneClient::DensePlaneClient(
    std::shared_ptr<PlaneConnections> connections)
    : owned_(std::move(connections)), connections_(*owned_) {}

absl::Status DensePlaneClient::PullDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
    std::optional<int64_t> sync_step) {
  return BeginPull(shards, out, versions, sync_step, /*awaited=*/true).Finish();
}

PlaneCall DensePlaneClient::BeginPullDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
    std::optional<int64_t> sync_step) {
  return BeginPull(shards, out, versions, sync_step, /*awaited=*/false);
}

PlaneCall DensePlaneClient::BeginPull(absl::Span<const std::string> shards,
                                      absl::Span<const absl::Span<float>> out,
                                      std::vector<int64_t>* versions,
                                      std::optional<int64_t> sync_step,
                                      bool awaited) {
  // Refused before anything is sent.
  if (shards.size() != out.size()) {
    return PlaneCall(absl::InvalidArgumentError(
        absl::StrCat(connections_.peer(), " PullDense: ", shards.size(),
                     " shards but ", out.size(), " destinations")));
  }
  if (versions != nullptr) versions->assign(shards.size(), 0);
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
  return connections_.Send(
      "PullDense", parts,
      [shards, out, versions](Socket& socket, bool discard) {
        return ReadPullReply(socket, discard, shards, out, versions);
      },
      awaited);
}

absl::Status DensePlaneClient::PushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  return BeginPush(shards, grads, base_versions, response, sync,
                   /*awaited=*/true)
      .Finish();
}

PlaneCall DensePlaneClient::BeginPushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  return BeginPush(shards, grads, base_versions, response, sync,
                   /*awaited=*/false);
}

PlaneCall DensePlaneClient::BeginPush(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync, bool awaited) {
  if (shards.size() != grads.size() ||
      (!base_versions.empty() && base_versions.size() != shards.size())) {
    return PlaneCall(absl::InvalidArgumentError(absl::StrCat(
        connections_.peer(), " PushDense: ", shards.size(), " shards, ",
        grads.size(), " gradients and ", base_versions.size(), " versions")));
  }
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
  return connections_.Send(
      "PushDense", parts,
      [response](Socket& socket, bool discard) {
        return ReadPlanePushReply(socket, FrameOp::kPushDenseReply, response,
                                  discard);
      },
      awaited);
}

}  // namespace tessera
