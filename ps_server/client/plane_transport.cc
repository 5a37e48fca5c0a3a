#include "ps_server/client/plane_transport.h"

#include <utility>

namespace tessera {
namespace {

class PlanePull final : public PsTransport::Pending {
 public:
  PlanePull(DensePlaneClient* client, DensePlaneClient::Pending call,
            absl::Span<const std::string> shards,
            absl::Span<const absl::Span<float>> out,
            std::vector<int64_t>* versions)
      : client_(client),
        call_(std::move(call)),
        shards_(shards),
        out_(out),
        versions_(versions) {}

  absl::Status Finish() override {
    return client_->FinishPullDense(std::move(call_), shards_, out_, versions_);
  }

 private:
  DensePlaneClient* const client_;
  DensePlaneClient::Pending call_;
  const absl::Span<const std::string> shards_;
  const absl::Span<const absl::Span<float>> out_;
  std::vector<int64_t>* const versions_;
};

class PlanePush final : public PsTransport::Pending {
 public:
  PlanePush(DensePlaneClient* client, DensePlaneClient::Pending call,
            PushResponse* response)
      : client_(client), call_(std::move(call)), response_(response) {}

  absl::Status Finish() override {
    return client_->FinishPushDense(std::move(call_), response_);
  }

 private:
  DensePlaneClient* const client_;
  DensePlaneClient::Pending call_;
  PushResponse* const response_;
};

}  // namespace

std::unique_ptr<PsTransport::Pending> PlaneTransport::BeginPullDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
    std::optional<int64_t> sync_step) {
  return std::make_unique<PlanePull>(
      &dense_, dense_.BeginPullDense(shards, sync_step), shards, out, versions);
}

std::unique_ptr<PsTransport::Pending> PlaneTransport::BeginPushDense(
    absl::Span<const std::string> shards,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const int64_t> base_versions, PushResponse* response,
    const SyncPush* sync) {
  return std::make_unique<PlanePush>(
      &dense_, dense_.BeginPushDense(shards, grads, base_versions, sync),
      response);
}

}  // namespace tessera
