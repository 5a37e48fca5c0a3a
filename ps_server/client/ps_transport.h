#ifndef TESSERA_PS_SERVER_CLIENT_PS_TRANSPORT_H_
#define TESSERA_PS_SERVER_CLIENT_PS_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps_service.pb.h"
#include "ps_server/wire/sync_push.h"

namespace tessera {

// The rows of one shard a call is about: ids of the whole variable, each
// row `row_elements` floats.
//
// `precision`: what the values travel in; the caller's buffers are fp32
// either way. A pull's rows: ROW_FP32 (the server widens), or the table's
// own precision (its stored bits, widened here, which is exact). A push's
// gradients: rounded to nearest even here (fp16 saturating at +-65504;
// NaN and infinities stay so, and the server refuses them), widened by
// the server.
struct RowsPart {
  absl::string_view shard;
  int64_t row_elements = 0;
  absl::Span<const int64_t> ids;
  RowPrecision precision = ROW_FP32;
};

// How one parameter server's data calls (dense tensors and sparse rows)
// travel. PsClient picks one transport per server, once, and sends every
// data call through it, so its callers never see which one it is; control
// calls (CreateShards, checkpoints, Health, Shutdown) stay on gRPC.
// Implementations: GrpcTransport (grpc_transport.h) and PlaneTransport
// (the TCP data plane, plane_transport.h). A new one is one implementation
// of this interface plus its server end.
//
// Each call's contract and error codes are PsClient's (ps_client.h); the
// arguments' sizes were checked by PsClient before a call gets here.
//
// Thread safety: all methods may be called concurrently.
class PsTransport {
 public:
  // A dense call that Begin* started. Finish waits for its reply and
  // returns the result of the whole call (an error of either half).
  // Dropping one that was never finished waits for it or abandons it (on
  // the data plane its reply is read into scratch); either way no buffer
  // of the call is touched afterwards.
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual absl::Status Finish() = 0;
  };

  virtual ~PsTransport() = default;

  virtual absl::Status PullDense(absl::Span<const std::string> shards,
                                 absl::Span<const absl::Span<float>> out,
                                 std::vector<int64_t>* versions,
                                 std::optional<int64_t> sync_step) = 0;
  virtual absl::Status PushDense(
      absl::Span<const std::string> shards,
      absl::Span<const absl::Span<const float>> grads,
      absl::Span<const int64_t> base_versions, PushResponse* response,
      const SyncPush* sync) = 0;

  // The same calls in two halves, so that one thread can have a call in
  // flight at every parameter server at once. Every argument must stay
  // valid (and `grads` unchanged) until Finish returns.
  virtual std::unique_ptr<Pending> BeginPullDense(
      absl::Span<const std::string> shards,
      absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
      std::optional<int64_t> sync_step) = 0;
  virtual std::unique_ptr<Pending> BeginPushDense(
      absl::Span<const std::string> shards,
      absl::Span<const absl::Span<const float>> grads,
      absl::Span<const int64_t> base_versions, PushResponse* response,
      const SyncPush* sync) = 0;

  virtual absl::Status PullRows(absl::Span<const RowsPart> parts,
                                absl::Span<const absl::Span<float>> out,
                                std::optional<int64_t> sync_step) = 0;
  virtual absl::Status PushRows(absl::Span<const RowsPart> parts,
                                absl::Span<const absl::Span<const float>> grads,
                                PushResponse* response,
                                const SyncPush* sync) = 0;
};

// A Pending that failed before anything was sent: Finish returns `status`.
class FailedPending final : public PsTransport::Pending {
 public:
  explicit FailedPending(absl::Status status) : status_(std::move(status)) {}
  absl::Status Finish() override { return status_; }

 private:
  const absl::Status status_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_PS_TRANSPORT_H_
