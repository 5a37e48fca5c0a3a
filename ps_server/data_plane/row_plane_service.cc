#include "ps_server/data_plane/row_plane_service.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/optimizer/row_precision.h"
#include "ps_server/gradient_check.h"
#include "ps_server/row_push_apply.h"
#include "ps_server/wire/dense_wire.h"
#include "ps_server/wire/row_wire.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {
namespace {

// Pulled rows go out in pieces of at most this: the copy out of the table
// stays in cache until the kernel copies it into the socket.
constexpr int64_t kPullPieceBytes = int64_t{1} << 20;
// Gradients are received in pieces of this, each checked for NaN/Inf
// while it is still in cache.
constexpr int64_t kPushPieceBytes = int64_t{1} << 20;
// No request declares more ids and values than this: a larger one is not
// a worker's, and is hung up on before anything is allocated for it.
constexpr int64_t kMaxRequestBytes = int64_t{1} << 34;
// The least bytes one shard takes in a table (an empty name, two Int64).
constexpr int64_t kMinPartBytes = 2 + 8 + 8;

absl::Status Malformed(const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("data plane: malformed ", what, " table"));
}

// The refusal of a part whose shard is unknown, of another row size, does
// not hold one of the ids, or (a pull) cannot serve its precision; sets
// part->table otherwise.
absl::Status Resolve(ShardStore& store, absl::Span<const int64_t> ids,
                     bool pull, RowPlaneService::Scratch::Part* part) {
  absl::StatusOr<std::shared_ptr<RowTable>> table = store.FindRows(part->name);
  if (!table.ok()) return table.status();
  if ((*table)->row_elements() != part->row_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat("wrong shape: rows of shard ", part->name, " have ",
                     (*table)->row_elements(), " elements, the request's ",
                     part->row_elements));
  }
  if (absl::Status s = (*table)->CheckIds(ids); !s.ok()) return s;
  if (pull) {
    if (absl::Status s = CheckWirePrecision(**table, part->precision);
        !s.ok()) {
      return s;
    }
  }
  part->table = *std::move(table);
  return absl::OkStatus();
}

// Drops the tables a request looked up, so an idle connection keeps no
// deleted shard alive.
void ForgetTables(RowPlaneService::Scratch* scratch) {
  for (auto& part : scratch->parts) part.table.reset();
}

}  // namespace

absl::Status RowPlaneService::ReadParts(Socket& socket,
                                        const FrameHeader& request,
                                        Scratch* scratch) {
  const char* what = request.op == FrameOp::kPullRows ? "pull" : "push";
  if (request.bytes > kMaxFrameTableBytes ||
      static_cast<int64_t>(request.count) * kMinPartBytes > request.bytes) {
    return Malformed(what);
  }
  scratch->table.resize(request.bytes);
  if (absl::Status s =
          socket.ReadFull(scratch->table.data(), scratch->table.size());
      !s.ok()) {
    return s;
  }
  WireReader reader(scratch->table);
  scratch->parts.resize(request.count);
  const bool precisions = (request.flags & kFrameRowPrecisions) != 0;
  int64_t declared = 0;
  for (Scratch::Part& part : scratch->parts) {
    part.table.reset();
    int64_t precision = ROW_FP32;
    if (!reader.ReadString16(&part.name) ||
        !reader.ReadInt64(&part.row_elements) ||
        !reader.ReadInt64(&part.rows) || part.row_elements < 0 ||
        part.row_elements > kMaxWireRowElements || part.rows < 0 ||
        part.rows > kMaxWireRows ||
        (precisions && !reader.ReadInt64(&precision)) ||
        precision < INT32_MIN || precision > INT32_MAX ||
        !RowPrecision_IsValid(static_cast<int>(precision))) {
      return Malformed(what);
    }
    part.precision = static_cast<RowPrecision>(precision);
    int64_t bytes = part.rows * static_cast<int64_t>(sizeof(int64_t));
    if (request.op == FrameOp::kPushRows) {
      bytes += part.rows * part.row_elements *
               static_cast<int64_t>(RowPrecisionBytes(part.precision));
    }
    if (bytes > kMaxRequestBytes - declared) return Malformed(what);
    declared += bytes;
  }
  if (!reader.done()) return Malformed(what);
  return absl::OkStatus();
}

absl::Status RowPlaneService::ServePull(Socket& socket,
                                        const FrameHeader& request,
                                        Scratch* scratch) {
  if (absl::Status s = ReadParts(socket, request, scratch); !s.ok()) return s;
  core_->CountPull();
  int64_t total = 0;
  for (const Scratch::Part& part : scratch->parts) total += part.rows;
  scratch->ids.resize(total);
  if (absl::Status s =
          socket.ReadFull(scratch->ids.data(), total * sizeof(int64_t));
      !s.ok()) {
    return s;
  }
  // A sync pull reads the rows after every step before its own; a bad tag
  // is refused once the request is read, as the dense plane refuses it.
  absl::StatusOr<std::optional<int64_t>> sync_step = SyncPullOf(request);
  if (!sync_step.ok()) {
    ForgetTables(scratch);
    return WriteErrorReply(socket, FrameOp::kPullRowsReply, sync_step.status());
  }
  core_->sync_steps()->ApplyBefore(*sync_step);
  FrameHeader reply;
  reply.op = FrameOp::kPullRowsReply;
  reply.count = request.count;
  int64_t first = 0;
  for (Scratch::Part& part : scratch->parts) {
    const absl::Span<const int64_t> ids =
        absl::MakeConstSpan(scratch->ids.data() + first, part.rows);
    first += part.rows;
    if (absl::Status s = Resolve(*store_, ids, /*pull=*/true, &part); !s.ok()) {
      ForgetTables(scratch);
      return WriteErrorReply(socket, FrameOp::kPullRowsReply, s);
    }
    reply.bytes += kDensePartHeaderBytes +
                   part.rows * part.row_elements *
                       static_cast<int64_t>(RowPrecisionBytes(part.precision));
  }
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(reply, head);
  absl::Status io;
  if (scratch->parts.empty()) io = socket.WriteFull(head, sizeof(head));
  bool head_sent = false;
  first = 0;
  for (size_t k = 0; k < scratch->parts.size() && io.ok(); ++k) {
    Scratch::Part& part = scratch->parts[k];
    const int64_t row_bytes =
        part.row_elements * RowPrecisionBytes(part.precision);
    const int64_t piece_rows =
        std::max<int64_t>(1, kPullPieceBytes / std::max<int64_t>(1, row_bytes));
    int64_t done = 0;
    do {
      const int64_t n = std::min(piece_rows, part.rows - done);
      // In floats, room enough for n rows of any precision.
      scratch->values.resize(std::max<size_t>(
          scratch->values.size(), static_cast<size_t>(n * part.row_elements)));
      const int64_t version = part.table->ReadAs(
          absl::MakeConstSpan(scratch->ids.data() + first + done, n),
          part.precision, scratch->values.data());
      char part_head[kDensePartHeaderBytes];
      iovec parts[3];
      size_t count = 0;
      if (!head_sent) parts[count++] = {head, sizeof(head)};
      head_sent = true;
      if (done == 0) {
        // The version of the first piece, as the gRPC path's first chunk.
        EncodeDensePartHeader(version, part.rows * row_bytes, part_head);
        parts[count++] = {part_head, sizeof(part_head)};
      }
      parts[count++] = {scratch->values.data(),
                        static_cast<size_t>(n * row_bytes)};
      done += n;
      const bool last = k + 1 == scratch->parts.size() && done >= part.rows;
      io = socket.WriteAll(absl::MakeConstSpan(parts, count), !last);
    } while (io.ok() && done < part.rows);
    first += part.rows;
  }
  ForgetTables(scratch);
  return io;
}

namespace {

// One part's row ids and gradients, the gradients widened to fp32 as
// they arrive; *non_finite when any is NaN or Inf. The socket's error:
// the push was cut off.
absl::Status ReceivePart(Socket& socket, RowPlaneService::Scratch::Part& part,
                         std::vector<uint16_t>* narrow, bool* non_finite) {
  part.ids.resize(part.rows);
  part.grads.resize(part.rows * part.row_elements);
  if (absl::Status s =
          socket.ReadFull(part.ids.data(), part.rows * sizeof(int64_t));
      !s.ok()) {
    return s;  // cut off: nothing is applied
  }
  // Pieces of whole values: each widened (2-byte gradients, from the
  // scratch they arrive in) and checked while in cache.
  const int64_t value_bytes = RowPrecisionBytes(part.precision);
  const int64_t values = static_cast<int64_t>(part.grads.size());
  const int64_t piece_values = kPushPieceBytes / value_bytes;
  if (value_bytes != sizeof(float)) narrow->resize(piece_values);
  for (int64_t done = 0; done < values;) {
    const int64_t n = std::min(piece_values, values - done);
    float* dst = part.grads.data() + done;
    if (value_bytes == sizeof(float)) {
      if (absl::Status s = socket.ReadFull(dst, n * sizeof(float)); !s.ok()) {
        return s;
      }
    } else {
      if (absl::Status s = socket.ReadFull(narrow->data(), n * value_bytes);
          !s.ok()) {
        return s;
      }
      WidenRow(part.precision, narrow->data(), dst, n);
    }
    if (internal::AnyNonFinite(dst, n) != 0) *non_finite = true;
    done += n;
  }
  return absl::OkStatus();
}

// A push's answer after its update.
absl::Status WritePushReply(Socket& socket, uint32_t count,
                            const PushResponse& response) {
  const std::string bytes = response.SerializeAsString();
  FrameHeader reply;
  reply.op = FrameOp::kPushRowsReply;
  reply.count = count;
  reply.bytes = static_cast<int64_t>(bytes.size());
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(reply, head);
  const iovec parts[2] = {{head, sizeof(head)},
                          {const_cast<char*>(bytes.data()), bytes.size()}};
  return socket.WriteAll(parts);
}

}  // namespace

absl::Status RowPlaneService::ServePush(Socket& socket,
                                        const FrameHeader& request,
                                        Scratch* scratch) {
  if (absl::Status s = ReadParts(socket, request, scratch); !s.ok()) return s;
  core_->CountPush();
  absl::StatusOr<std::optional<SyncPush>> tag = SyncPushOf(request);
  const absl::Status bad_tag = tag.status();
  const std::optional<SyncPush> sync = tag.ok() ? *tag : std::nullopt;
  // Receive every declared byte first, so the connection stays in step
  // whatever is refused; each piece of gradient is checked for NaN/Inf
  // while it is in cache, and named only if it failed.
  std::vector<bool> non_finite(scratch->parts.size(), false);
  for (size_t k = 0; k < scratch->parts.size(); ++k) {
    bool part_non_finite = false;
    if (absl::Status s = ReceivePart(socket, scratch->parts[k],
                                     &scratch->narrow, &part_non_finite);
        !s.ok()) {
      return s;  // cut off: nothing is applied
    }
    non_finite[k] = part_non_finite;
  }
  absl::Status refused = bad_tag;
  for (size_t k = 0; k < scratch->parts.size() && refused.ok(); ++k) {
    Scratch::Part& part = scratch->parts[k];
    refused = Resolve(*store_, part.ids, /*pull=*/false, &part);
    if (refused.ok() && non_finite[k]) {
      refused = internal::NameNonFinite(part.grads, part.name, 0);
    }
  }
  if (!refused.ok()) {
    ForgetTables(scratch);
    return WriteErrorReply(socket, FrameOp::kPushRowsReply, refused);
  }
  // A shard named twice is one push of all its rows.
  for (size_t k = 1; k < scratch->parts.size(); ++k) {
    Scratch::Part& part = scratch->parts[k];
    for (size_t j = 0; j < k; ++j) {
      Scratch::Part& earlier = scratch->parts[j];
      if (earlier.table != part.table) continue;
      earlier.ids.insert(earlier.ids.end(), part.ids.begin(), part.ids.end());
      earlier.grads.insert(earlier.grads.end(), part.grads.begin(),
                           part.grads.end());
      part.table.reset();
      break;
    }
  }
  std::vector<RowGradient> grads;
  for (Scratch::Part& part : scratch->parts) {
    if (part.table != nullptr) {
      grads.push_back({part.table, &part.ids, &part.grads});
    }
  }
  PushResponse response;
  absl::Status applied =
      ApplyRowPush(grads, sync, core_->sync_steps(), &response);
  ForgetTables(scratch);
  if (!applied.ok()) {
    return WriteErrorReply(socket, FrameOp::kPushRowsReply, applied);
  }
  return WritePushReply(socket, request.count, response);
}

}  // namespace tessera
