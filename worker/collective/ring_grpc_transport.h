#ifndef TESSERA_WORKER_COLLECTIVE_RING_GRPC_TRANSPORT_H_
#define TESSERA_WORKER_COLLECTIVE_RING_GRPC_TRANSPORT_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"
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
  void ShutDown() override;

 private:
  RingLink link_;
  std::string right_name_;
  std::unique_ptr<Collective::Stub> right_;
  // The stream of the Send in progress, for ShutDown to cancel.
  absl::Mutex stream_mu_;
  grpc::ClientContext* stream_context_ ABSL_GUARDED_BY(stream_mu_) = nullptr;
  bool shut_down_ ABSL_GUARDED_BY(stream_mu_) = false;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_RING_GRPC_TRANSPORT_H_
