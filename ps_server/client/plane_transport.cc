#include "ps_server/client/plane_transport.h"

#include <utility>

namespace tessera {
namespace {

// A split dense call; dropped unfinished, its reply is read into scratch.
class PlanePending final : public PsTransport::Pending {
 public:
  explicit PlanePending(PlaneCall call) : call_(std::move(call)) {}

  absl::Status Finish() override { return call_.Finish(); }

 private:
  PlaneCall call_;
};

}  // namespace

std::unique_ptr<PsTransport::Pending> PlaneTransport::BeginPullDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
    std::optional<int64_t> sync_step) {
  return std::make_unique<PlanePending>(
      dense_.BeginPullDense(shards, out, versions, sync_step));
}

std::unique_ptr<PsTransport::Pending> PlaneTransport::BeginPushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  return std::make_unique<PlanePending>(
      dense_.BeginPushDense(shards, grads, base_versions, response, sync));
}

}  // namespace tessera
