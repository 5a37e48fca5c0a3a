#ifndef TESSERA_PS_SERVER_SYNC_PUSH_H_
#define TESSERA_PS_SERVER_SYNC_PUSH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"

namespace tessera {

// Sync mode's tag on a dense push: the global step the gradients belong to
// and how many workers' gradients complete it. It travels as call
// metadata, so the tensor wire format is the same in every mode.
struct SyncPush {
  int64_t step = 0;
  int required = 0;
};

inline constexpr char kSyncStepKey[] = "tessera-sync-step";
inline constexpr char kSyncRequiredKey[] = "tessera-sync-required";

inline void AttachSyncPush(const SyncPush& sync, grpc::ClientContext* ctx) {
  ctx->AddMetadata(kSyncStepKey, std::to_string(sync.step));
  ctx->AddMetadata(kSyncRequiredKey, std::to_string(sync.required));
}

// The tag of a push, nullopt for an asynchronous one; InvalidArgument
// when the metadata is malformed.
inline absl::StatusOr<std::optional<SyncPush>> ReadSyncPush(
    const grpc::CallbackServerContext& ctx) {
  const auto& md = ctx.client_metadata();
  auto step = md.find(kSyncStepKey);
  auto required = md.find(kSyncRequiredKey);
  if (step == md.end() && required == md.end()) return std::nullopt;
  SyncPush sync;
  if (step == md.end() || required == md.end() ||
      !absl::SimpleAtoi(
          absl::string_view(step->second.data(), step->second.size()),
          &sync.step) ||
      !absl::SimpleAtoi(
          absl::string_view(required->second.data(), required->second.size()),
          &sync.required) ||
      sync.step < 0 || sync.required < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sync push: metadata ", kSyncStepKey, " and ", kSyncRequiredKey,
        " must both be given, step >= 0 and required >= 1"));
  }
  return std::optional<SyncPush>(sync);
}

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_SYNC_PUSH_H_
