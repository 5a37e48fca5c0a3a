#ifndef TESSERA_PS_SERVER_WIRE_SYNC_PUSH_H_
#define TESSERA_PS_SERVER_WIRE_SYNC_PUSH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/data_plane/frame.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"

namespace tessera {

// Sync mode's tag on a push (dense or rows): the global step the gradients
// belong to, how many parts complete it, and which part this is (the
// position of the worker's step in the global step). A part pushed twice
// (a step run again after its worker died) counts once. It travels as
// call metadata (or in the data plane's frame header), so the tensor wire
// format is the same in every mode.
//
// `required` 0: an asynchronous push (async, ssp, the tables of hybrid and
// hybrid:ssp) that carries only `step`, the 1-based number of the worker
// step its gradients come from; the server applies that step's rate of
// the learning-rate schedule (UpdateStep), whatever the order the pushes
// arrive in. A push without any tag (an older worker) gets the rate of the
// shard's count of updates.
struct SyncPush {
  int64_t step = 0;
  int required = 0;
  int part = 0;
  // Whether the push is a part of a lockstep step (else: async, `step`
  // only).
  bool lockstep() const { return required > 0; }
};

// Sync mode's tag on a pull: the global step it reads for. Before
// answering, the server applies every complete step before it
// (ps_server/sync_steps.h), so the pull sees them all.
inline constexpr char kSyncStepKey[] = "tessera-sync-step";
inline constexpr char kSyncRequiredKey[] = "tessera-sync-required";
inline constexpr char kSyncPartKey[] = "tessera-sync-part";
// An asynchronous push's step number (SyncPush with required 0).
inline constexpr char kPushStepKey[] = "tessera-push-step";
// The most parts a step may have (the frame header packs required and
// part into one int64).
inline constexpr int kMaxSyncParts = 1 << 30;

inline void AttachSyncPush(const SyncPush& sync, grpc::ClientContext* ctx) {
  if (!sync.lockstep()) {
    ctx->AddMetadata(kPushStepKey, std::to_string(sync.step));
    return;
  }
  ctx->AddMetadata(kSyncStepKey, std::to_string(sync.step));
  ctx->AddMetadata(kSyncRequiredKey, std::to_string(sync.required));
  ctx->AddMetadata(kSyncPartKey, std::to_string(sync.part));
}

inline void AttachSyncPull(int64_t step, grpc::ClientContext* ctx) {
  ctx->AddMetadata(kSyncStepKey, std::to_string(step));
}

// On the data plane a push's tag travels in its frame header
// (common/data_plane/frame.h): kFrameSyncPush, a = the step, b = required
// and part packed; a pull's in kFrameSyncPull and a; an asynchronous
// push's step number in kFramePushStep and a. Both ends use these.
inline void TagSyncPush(const SyncPush* sync, FrameHeader* header) {
  if (sync == nullptr) return;
  if (!sync->lockstep()) {
    header->flags |= kFramePushStep;
    header->a = sync->step;
    return;
  }
  header->flags |= kFrameSyncPush;
  header->a = sync->step;
  header->b = static_cast<int64_t>(sync->required) |
              (static_cast<int64_t>(sync->part) << 32);
}

inline void TagSyncPull(std::optional<int64_t> step, FrameHeader* header) {
  if (!step.has_value()) return;
  header->flags |= kFrameSyncPull;
  header->a = *step;
}

// The tag of a data-plane push (nullopt: asynchronous without a step
// number); InvalidArgument naming the bad field.
inline absl::StatusOr<std::optional<SyncPush>> SyncPushOf(
    const FrameHeader& header) {
  if ((header.flags & kFrameSyncPush) == 0) {
    if ((header.flags & kFramePushStep) == 0) return std::nullopt;
    if (header.a < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("push: step number ", header.a, " must be >= 1"));
    }
    return std::optional<SyncPush>(SyncPush{header.a, 0, 0});
  }
  SyncPush sync;
  sync.step = header.a;
  sync.required = static_cast<int>(header.b & 0xffffffff);
  sync.part = static_cast<int>(header.b >> 32);
  if (sync.step < 0 || sync.required < 1 || sync.required > kMaxSyncParts ||
      sync.part < 0 || sync.part >= kMaxSyncParts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sync push: step ", sync.step, ", required ", sync.required, ", part ",
        sync.part, ": the step must be >= 0, required in [1, ", kMaxSyncParts,
        "] and the part in [0, ", kMaxSyncParts, ")"));
  }
  return std::optional<SyncPush>(sync);
}

// The step a data-plane pull reads for (nullopt: untagged);
// InvalidArgument for a negative one.
inline absl::StatusOr<std::optional<int64_t>> SyncPullOf(
    const FrameHeader& header) {
  if ((header.flags & kFrameSyncPull) == 0) return std::nullopt;
  if (header.a < 0) {
    return absl::InvalidArgumentError("sync pull: the step must be >= 0");
  }
  return std::optional<int64_t>(header.a);
}

namespace internal {

inline bool ReadMetadataInt(const grpc::CallbackServerContext& ctx,
                            const char* key, int64_t* value, bool* present) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(key);
  *present = it != md.end();
  if (!*present) return true;
  return absl::SimpleAtoi(
      absl::string_view(it->second.data(), it->second.size()), value);
}

}  // namespace internal

// The tag of a push, nullopt for an asynchronous one without a step
// number; InvalidArgument when the metadata is malformed or incomplete.
inline absl::StatusOr<std::optional<SyncPush>> ReadSyncPush(
    const grpc::CallbackServerContext& ctx) {
  int64_t step = 0, required = 0, part = 0, push_step = 0;
  bool has_step, has_required, has_part, has_push_step;
  const bool parsed =
      internal::ReadMetadataInt(ctx, kSyncStepKey, &step, &has_step) &&
      internal::ReadMetadataInt(ctx, kSyncRequiredKey, &required,
                                &has_required) &&
      internal::ReadMetadataInt(ctx, kSyncPartKey, &part, &has_part) &&
      internal::ReadMetadataInt(ctx, kPushStepKey, &push_step, &has_push_step);
  if (parsed && !has_step && !has_required && !has_part) {
    if (!has_push_step) return std::nullopt;
    if (push_step < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push: metadata ", kPushStepKey, " must be a step number >= 1"));
    }
    return std::optional<SyncPush>(SyncPush{push_step, 0, 0});
  }
  if (!parsed || !has_step || !has_required || !has_part || step < 0 ||
      required < 1 || required > kMaxSyncParts || part < 0 ||
      part >= kMaxSyncParts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sync push: metadata ", kSyncStepKey, ", ", kSyncRequiredKey, " and ",
        kSyncPartKey, " must all be given, step >= 0, required >= 1 and ",
        "part >= 0"));
  }
  return std::optional<SyncPush>(
      SyncPush{step, static_cast<int>(required), static_cast<int>(part)});
}

// The step a pull reads for, nullopt for an untagged pull; InvalidArgument
// when the metadata is malformed.
inline absl::StatusOr<std::optional<int64_t>> ReadSyncPull(
    const grpc::CallbackServerContext& ctx) {
  int64_t step = 0;
  bool present;
  if (!internal::ReadMetadataInt(ctx, kSyncStepKey, &step, &present) ||
      (present && step < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sync pull: metadata ", kSyncStepKey, " must be a step >= 0"));
  }
  if (!present) return std::nullopt;
  return std::optional<int64_t>(step);
}

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_WIRE_SYNC_PUSH_H_
