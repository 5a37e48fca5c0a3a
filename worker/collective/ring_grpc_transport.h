#ifndef TESSERA_WORKER_COLLECTIVE_RING_GRPC_TRANSPORT_H_
#define TESSERA_WORKER_COLLECTIVE_RING_GRPC_TRANSPORT_H_

#include <memory>
#include <string>
#include <utility>

#include "proto/collective_service.grpc.pb.h"
#include "worker/collective/ring_transport.h"

namespace tessera {

// The ring over gRPC: each call is one Collective.Exchange stream to the
// right neighbour, which the RingReceiver registered on its server takes.
// Thread safety: RingTransport's.
class GrpcRingTransport final : public RingTransport {
 public:
  explicit GrpcRingTransport(RingLink link) : link_(std::move(link)) {}

  void SetRight(const std::string& address, const std::string& name) override;
  absl::Status Send(RingCall* call, absl::Span<const float> data,
                    absl::Time deadline) override;
  void Reset() override {}
  absl::Status Reform(int rank, int num_ranks) override {
    link_.rank = rank;
    link_.num_ranks = num_ranks;
    return absl::OkStatus();
  }

 private:
  RingLink link_;
  std::string right_name_;
  std::unique_ptr<Collective::Stub> right_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_RING_GRPC_TRANSPORT_H_
