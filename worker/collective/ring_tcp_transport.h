#ifndef TESSERA_WORKER_COLLECTIVE_RING_TCP_TRANSPORT_H_
#define TESSERA_WORKER_COLLECTIVE_RING_TCP_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/data_plane/listener.h"
#include "common/data_plane/socket.h"
#include "common/data_plane/tls.h"
#include "proto/collective_service.grpc.pb.h"
#include "worker/collective/ring_transport.h"

namespace tessera {

// The ring over the TCP data plane (--data_plane=tcp): a call's chunks
// travel as frames (worker/collective/ring_wire.h) on one connection to
// the right neighbour, kept from call to call, whose port the neighbour
// announces through Collective.DataPlane. The job token is proved by the
// data plane handshake, TLS used when the link's security has it.
//
// It also owns this rank's listener, which hands the left neighbour's
// connections to the receiver (RingReceiver::ServeTcp) on its own threads;
// those threads stop when the transport is destroyed, so it must go
// before the receiver.
// Thread safety: RingTransport's.
class TcpRingTransport final : public RingTransport {
 public:
  // Starts the listener (on every interface, any port; the receiver
  // announces it) and the TLS contexts, unless the ring has one rank.
  // Errors: TLS files that do not load, a listener that cannot start.
  static absl::StatusOr<std::unique_ptr<TcpRingTransport>> Start(RingLink link);

  void SetRight(const std::string& address, const std::string& name) override;
  absl::Status Send(RingCall* call, absl::Span<const float> data,
                    absl::Time deadline) override;
  void Reset() override;
  // Starts the listener when the ring grows from one rank.
  absl::Status Reform(int rank, int num_ranks) override;
  void ShutDown() override;
  int64_t connections_opened() const override { return connections_opened_; }
  int port() const override {
    return listener_ == nullptr ? 0 : listener_->port();
  }

 private:
  explicit TcpRingTransport(RingLink link) : link_(std::move(link)) {}
  // The listener and the TLS contexts (a ring of more than one rank).
  absl::Status StartListener();
  // A connection from the left neighbour, on its listener thread.
  void ServeLeft(Socket& socket);
  // The connection to the right neighbour for one call, handshake done.
  absl::StatusOr<Socket> ConnectRight(absl::Time deadline);
  // right_socket_ open for a call: the kept connection, or a new one in
  // place of one the neighbour closed (it restarted, or gave a call up).
  absl::Status KeepRightConnected(absl::Time deadline);
  void CloseRight() {
    absl::MutexLock lock(&right_mu_);
    right_socket_.Close();
  }

  RingLink link_;  // rank and num_ranks change in Reform
  std::string right_address_;
  std::string right_name_;
  std::unique_ptr<Collective::Stub> right_;  // asks for its port
  std::shared_ptr<const DataPlaneTls> tls_client_;
  int right_port_ = 0;  // the right neighbour's data plane; 0: not asked
  // Kept from call to call. Replaced and closed by the calling thread
  // under right_mu_, so that ShutDown can shut it down from another.
  absl::Mutex right_mu_;
  Socket right_socket_;
  bool shut_down_ ABSL_GUARDED_BY(right_mu_) = false;
  int64_t connections_opened_ = 0;
  // Last: its threads use the receiver, and go first.
  std::unique_ptr<Listener> listener_;
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_RING_TCP_TRANSPORT_H_
