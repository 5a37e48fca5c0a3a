#include "ps_server/client/row_plane_client.h"

#include <algorithm>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "common/data_plane/frame.h"
#include "common/optimizer/row_precision.h"
#include "ps_server/client/plane_replies.h"
#include "ps_server/wire/dense_wire.h"
#include "ps_server/wire/row_wire.h"

namespace tessera {
namespace {

// 2-byte rows are received in pieces of this and widened from there into
// the caller's buffer while in cache.
constexpr int64_t kWidenPieceBytes = int64_t{64} << 10;

// The request's table (row_wire.h), with each part's precision
// (kFrameRowPrecisions).
std::string RowsTable(absl::Span<const RowsPart> parts) {
  std::string table;
  table.reserve(parts.size() * 40);
  for (const RowsPart& part : parts) {
    AppendString16(part.shard, &table);
    AppendInt64(part.row_elements, &table);
    AppendInt64(static_cast<int64_t>(part.ids.size()), &table);
    AppendInt64(part.precision, &table);
  }
  return table;
}

// Receives n values of `precision` into dst as fp32.
absl::Status ReadValues(Socket& socket, RowPrecision precision, float* dst,
                        int64_t n) {
  if (precision == ROW_FP32) {
    // The one copy: the kernel's, into the caller's buffer.
    return socket.ReadFull(dst, n * sizeof(float));
  }
  thread_local std::vector<uint16_t> narrow;
  const int64_t piece = kWidenPieceBytes / sizeof(uint16_t);
  narrow.resize(piece);
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(piece, n - done);
    if (absl::Status s = socket.ReadFull(narrow.data(), m * sizeof(uint16_t));
        !s.ok()) {
      return s;
    }
    WidenRow(precision, narrow.data(), dst + done, m);
    done += m;
  }
  return absl::OkStatus();
}

absl::Status CheckSizes(const char* call, absl::Span<const RowsPart> parts,
                        size_t buffers, absl::FunctionRef<size_t(size_t)> size,
                        const std::string& peer) {
  if (parts.size() != buffers) {
    return absl::InvalidArgumentError(absl::StrCat(peer, " ", call, ": ",
                                                   parts.size(), " shards but ",
                                                   buffers, " buffers"));
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const size_t need = parts[i].ids.size() * parts[i].row_elements;
    if (size(i) != need || parts[i].row_elements < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          peer, " ", call, ": ", parts[i].ids.size(), " rows of ",
          parts[i].row_elements, " floats of shard ", parts[i].shard, " need ",
          need, " floats, the buffer has ", size(i)));
    }
  }
  return absl::OkStatus();
}

// A pull's reply, each part's rows widened into out[i] (skipped when
// `discard`).
PlaneReply ReadPullRowsReply(Socket& socket, bool discard,
                             absl::Span<const RowsPart> parts,
                             absl::Span<const absl::Span<float>> out) {
  if (PlaneReply r =
          ReadPlanePullHeader(socket, FrameOp::kPullRowsReply, out.size());
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
    const int64_t expected = static_cast<int64_t>(out[i].size()) *
                             RowPrecisionBytes(parts[i].precision);
    if (bytes != expected) {
      // The rest of the reply is not read: the connection is dropped.
      return {absl::InternalError(
                  absl::StrCat("the reply holds ", bytes, " bytes of shard ",
                               parts[i].shard, ", not ", expected)),
              false};
    }
    if (absl::Status s = ReadValues(socket, parts[i].precision, out[i].data(),
                                    static_cast<int64_t>(out[i].size()));
        !s.ok()) {
      return {s, false};
    }
  }
  return {};
}

}  // namespace

RowPlaneClient::RowPlaneClient(RowPlaneClientOptions options)
    : owned_(std::make_shared<PlaneConnections>(std::move(options))),
      connections_(*owned_) {}

RowPlaneClient::RowPlaneClient(std::shared_ptr<PlaneConnections> connections)
    : owned_(std::move(connections)), connections_(*owned_) {}

absl::Status RowPlaneClient::PullRows(absl::Span<const RowsPart> parts,
                                      absl::Span<const absl::Span<float>> out,
                                      std::optional<int64_t> sync_step) {
  if (absl::Status s = CheckSizes(
          "PullRows", parts, out.size(),
          [&](size_t i) { return out[i].size(); }, connections_.peer());
      !s.ok()) {
    return s;
  }
  const std::string table = RowsTable(parts);
  FrameHeader request;
  request.op = FrameOp::kPullRows;
  request.flags = kFrameRowPrecisions;
  request.count = static_cast<uint32_t>(parts.size());
  request.bytes = static_cast<int64_t>(table.size());
  TagSyncPull(sync_step, &request);
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(request, head);
  std::vector<iovec> iov;
  iov.reserve(2 + parts.size());
  iov.push_back({head, sizeof(head)});
  iov.push_back({const_cast<char*>(table.data()), table.size()});
  for (const RowsPart& part : parts) {
    iov.push_back({const_cast<int64_t*>(part.ids.data()),
                   part.ids.size() * sizeof(int64_t)});
  }
  return connections_
      .Send("PullRows", iov,
            [parts, out](Socket& socket, bool discard) {
              return ReadPullRowsReply(socket, discard, parts, out);
            })
      .Finish();
}

absl::Status RowPlaneClient::PushRows(
    absl::Span<const RowsPart> parts,
    absl::Span<const absl::Span<const float>> grads, PushResponse* response,
    const SyncPush* sync) {
  if (absl::Status s = CheckSizes(
          "PushRows", parts, grads.size(),
          [&](size_t i) { return grads[i].size(); }, connections_.peer());
      !s.ok()) {
    return s;
  }
  const std::string table = RowsTable(parts);
  FrameHeader request;
  request.op = FrameOp::kPushRows;
  request.flags = kFrameRowPrecisions;
  request.count = static_cast<uint32_t>(parts.size());
  request.bytes = static_cast<int64_t>(table.size());
  TagSyncPush(sync, &request);
  // 2-byte gradients, rounded to nearest (ps_transport.h), all parts in
  // one buffer kept per thread; fp32 ones go from the caller's memory.
  thread_local std::vector<uint16_t> narrow;
  size_t narrow_values = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].precision != ROW_FP32) narrow_values += grads[i].size();
  }
  narrow.resize(narrow_values);
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(request, head);
  std::vector<iovec> iov;
  iov.reserve(2 + 2 * parts.size());
  iov.push_back({head, sizeof(head)});
  iov.push_back({const_cast<char*>(table.data()), table.size()});
  size_t at = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    iov.push_back({const_cast<int64_t*>(parts[i].ids.data()),
                   parts[i].ids.size() * sizeof(int64_t)});
    if (parts[i].precision == ROW_FP32) {
      iov.push_back({const_cast<float*>(grads[i].data()),
                     grads[i].size() * sizeof(float)});
      continue;
    }
    uint16_t* dst = narrow.data() + at;
    NarrowRowNearest(parts[i].precision, grads[i].data(), dst,
                     static_cast<int64_t>(grads[i].size()));
    iov.push_back({dst, grads[i].size() * sizeof(uint16_t)});
    at += grads[i].size();
  }
  // Written before Send returns, so `narrow` may be reused after it.
  return connections_
      .Send("PushRows", iov,
            [response](Socket& socket, bool discard) {
              return ReadPlanePushReply(socket, FrameOp::kPushRowsReply,
                                        response, discard);
            })
      .Finish();
}

}  // namespace tessera
