#ifndef TESSERA_PS_SERVER_CLIENT_PLANE_TRANSPORT_H_
#define TESSERA_PS_SERVER_CLIENT_PLANE_TRANSPORT_H_

#include <memory>

#include "ps_server/client/dense_plane_client.h"
#include "ps_server/client/plane_connections.h"
#include "ps_server/client/ps_transport.h"
#include "ps_server/client/row_plane_client.h"

namespace tessera {

// Data calls on a parameter server's TCP data plane
// (ps_server/data_plane/dense_plane_server.h): dense and row calls on one
// connection (plane_connections.h), so a server holds one descriptor per
// worker (#46); a worker's calls to one server are pipelined on it. The
// split calls are real halves: Begin sends the request, Finish reads the
// reply, so one thread keeps a call in flight at every server without a
// wake-up per call.
class PlaneTransport final : public PsTransport {
 public:
  explicit PlaneTransport(const PlaneConnectionOptions& options)
      : connections_(std::make_shared<PlaneConnections>(options)),
        dense_(connections_),
        rows_(connections_) {}

  // Connections made to the server so far (one unless one broke).
  int64_t connects() const { return connections_->connects(); }

  absl::Status PullDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<float>> out,
                         std::vector<int64_t>* versions,
                         std::optional<int64_t> sync_step) override {
    return dense_.PullDense(shards, out, versions, sync_step);
  }
  absl::Status PushDense(absl::Span<const std::string> shards,
                         absl::Span<const absl::Span<const float>> grads,
                         absl::Span<const int64_t> base_versions,
                         PushResponse* response,
                         const SyncPush* sync) override {
    return dense_.PushDense(shards, grads, base_versions, response, sync);
  }
  std::unique_ptr<Pending> BeginPullDense(
      absl::Span<const std::string> shards,
      absl::Span<const absl::Span<float>> out, std::vector<int64_t>* versions,
      std::optional<int64_t> sync_step) override;
  std::unique_ptr<Pending> BeginPushDense(
      absl::Span<const std::string> shards,
      absl::Span<const absl::Span<const float>> grads,
      absl::Span<const int64_t> base_versions, PushResponse* response,
      const SyncPush* sync) override;
  absl::Status PullRows(absl::Span<const RowsPart> parts,
                        absl::Span<const absl::Span<float>> out,
                        std::optional<int64_t> sync_step) override {
    return rows_.PullRows(parts, out, sync_step);
  }
  absl::Status PushRows(absl::Span<const RowsPart> parts,
                        absl::Span<const absl::Span<const float>> grads,
                        PushResponse* response, const SyncPush* sync) override {
    return rows_.PushRows(parts, grads, response, sync);
  }

 private:
  const std::shared_ptr<PlaneConnections> connections_;
  DensePlaneClient dense_;
  RowPlaneClient rows_;
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_PLANE_TRANSPORT_H_
