#ifndef TESSERA_PS_SERVER_WIRE_PUSH_SIZE_H_
#define TESSERA_PS_SERVER_WIRE_PUSH_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"

namespace tessera {

// What a push (PushDense or PushRows) will send, declared by the client in
// call metadata before its first byte. A cancelled call, an expired
// deadline or a dropped connection ends a client stream on the server just
// as the client's last write does, so without the declaration a server
// would apply whatever part of a push it had received; with it, a push is
// applied only when everything declared arrived.
//
// PushDense: `parts` shards and `bytes` gradient bytes in all.
// PushRows: `parts` rows (ids) and `bytes` value bytes in all.
struct PushSize {
  int64_t parts = 0;
  int64_t bytes = 0;
};

inline constexpr char kPushPartsKey[] = "tessera-push-parts";
inline constexpr char kPushBytesKey[] = "tessera-push-bytes";

inline void DeclarePushSize(const PushSize& size, grpc::ClientContext* ctx) {
  ctx->AddMetadata(kPushPartsKey, std::to_string(size.parts));
  ctx->AddMetadata(kPushBytesKey, std::to_string(size.bytes));
}

// The declared size of the push `call` ("PushDense"); InvalidArgument
// naming the call when it is missing or malformed.
inline absl::StatusOr<PushSize> ReadPushSize(
    const grpc::CallbackServerContext& ctx, absl::string_view call) {
  const auto& md = ctx.client_metadata();
  auto parts = md.find(kPushPartsKey);
  auto bytes = md.find(kPushBytesKey);
  PushSize size;
  auto number = [](const grpc::string_ref& text, int64_t* out) {
    return absl::SimpleAtoi(absl::string_view(text.data(), text.size()), out) &&
           *out >= 0;
  };
  if (parts == md.end() || bytes == md.end() ||
      !number(parts->second, &size.parts) ||
      !number(bytes->second, &size.bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        call, ": the call must declare its size in metadata ", kPushPartsKey,
        " and ", kPushBytesKey,
        " (whole numbers >= 0), so that a push cut off midway is not "
        "applied"));
  }
  return size;
}

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_WIRE_PUSH_SIZE_H_
