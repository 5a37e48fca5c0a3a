#include "ps_server/client/plane_replies.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps_server/wire/dense_wire.h"

namespace tessera {

PlaneReply ReadPlaneReplyHeader(Socket& socket, FrameOp op,
                                FrameHeader* header) {
  bool in_step = false;
  absl::Status s = ReadReplyHeader(socket, op, header, &in_step);
  return {s, in_step};
}

PlaneReply ReadPlanePushReply(Socket& socket, FrameOp op,
                              PushResponse* response, bool discard) {
  FrameHeader reply;
  if (PlaneReply r = ReadPlaneReplyHeader(socket, op, &reply); !r.status.ok()) {
    return r;
  }
  if (reply.bytes > kMaxFrameTableBytes) {
    return {absl::InternalError("the reply is too long"), false};
  }
  std::string bytes(reply.bytes, '\0');
  if (absl::Status s = socket.ReadFull(bytes.data(), bytes.size()); !s.ok()) {
    return {s, false};
  }
  PushResponse dropped;
  if (!(discard ? &dropped : response)->ParseFromString(bytes)) {
    // Not the protocol: nothing after it can be trusted.
    return {absl::InternalError("the reply is not a PushResponse"), false};
  }
  return {};
}

PlaneReply ReadPlanePullHeader(Socket& socket, FrameOp op, size_t parts) {
  FrameHeader reply;
  if (PlaneReply r = ReadPlaneReplyHeader(socket, op, &reply); !r.status.ok()) {
    return r;
  }
  if (reply.count != parts) {
    return {absl::InternalError(absl::StrCat("the reply holds ", reply.count,
                                             " shards, not ", parts)),
            false};
  }
  return {};
}

PlaneReply ReadPlanePart(Socket& socket, bool discard, int64_t* version,
                         int64_t* bytes) {
  char part[kDensePartHeaderBytes];
  if (absl::Status s = socket.ReadFull(part, sizeof(part)); !s.ok()) {
    return {s, false};
  }
  DecodeDensePartHeader(part, version, bytes);
  if (*bytes < 0) {
    return {absl::InternalError(
                absl::StrCat("a reply part claims ", *bytes, " bytes")),
            false};
  }
  if (discard) {
    // Nothing of the caller's is touched: it dropped the call.
    if (absl::Status s = SkipPlaneBytes(socket, *bytes); !s.ok()) {
      return {s, false};
    }
  }
  return {};
}

absl::Status SkipPlaneBytes(Socket& socket, int64_t bytes) {
  thread_local std::vector<char> scratch;
  scratch.resize(int64_t{64} << 10);
  for (int64_t done = 0; done < bytes;) {
    const int64_t n =
        std::min(static_cast<int64_t>(scratch.size()), bytes - done);
    if (absl::Status s = socket.ReadFull(scratch.data(), n); !s.ok()) return s;
    done += n;
  }
  return absl::OkStatus();
}

}  // namespace tessera
