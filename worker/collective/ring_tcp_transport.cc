// TcpRingTransport: the listener that takes the left neighbour's
// connections, and the sender that streams one call's chunks to the right
// neighbour as frames (ring_wire.h).
#include "worker/collective/ring_tcp_transport.h"

#include <sys/uio.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/handshake.h"
#include "common/data_plane/socket.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "grpcpp/client_context.h"
#include "worker/collective/ring_wire.h"

namespace tessera {
namespace {

// The handshake and TLS must not wait on a silent peer for longer.
constexpr double kMaxHandshakeS = 30;

double SecondsLeft(absl::Time deadline) {
  // A socket timeout of 0 means none: keep at least a millisecond.
  return std::max(absl::ToDoubleSeconds(deadline - absl::Now()), 1e-3);
}

// The call's end after its chunks were written with `sent`: the
// receiver's answer once it has everything, or why it refused the call.
absl::Status AwaitReply(Socket& socket, absl::Status sent) {
  FrameHeader reply;
  if (sent.ok()) {
    // The receiver answers once it has everything, or says why not.
    return ReadReplyHeader(socket, FrameOp::kRingReply, &reply);
  }
  if (absl::IsUnavailable(sent)) {
    // A receiver that refused the call wrote why before it hung up.
    socket.SetTimeout(0.2).IgnoreError();
    absl::Status why = ReadReplyHeader(socket, FrameOp::kRingReply, &reply);
    if (!why.ok() && !absl::IsUnavailable(why) &&
        !absl::IsDeadlineExceeded(why) && !absl::IsInternal(why)) {
      return why;
    }
  }
  return sent;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpRingTransport>> TcpRingTransport::Start(
    RingLink link) {
  std::unique_ptr<TcpRingTransport> t(new TcpRingTransport(std::move(link)));
  if (t->link_.num_ranks == 1) return t;  // no neighbour
  if (absl::Status s = t->StartListener(); !s.ok()) return s;
  return t;
}

absl::Status TcpRingTransport::StartListener() {
  const RingLink& l = link_;
  std::shared_ptr<const DataPlaneTls> tls_server;
  if (l.security.tls.has_value()) {
    absl::StatusOr<std::shared_ptr<const DataPlaneTls>> server =
        DataPlaneTls::Create(*l.security.tls, DataPlaneTls::Role::kServer);
    if (!server.ok()) return server.status();
    absl::StatusOr<std::shared_ptr<const DataPlaneTls>> client =
        DataPlaneTls::Create(*l.security.tls, DataPlaneTls::Role::kClient);
    if (!client.ok()) return client.status();
    tls_server = *std::move(server);
    tls_client_ = *std::move(client);
  }
  // Every interface: the left neighbour dials the host of this rank's
  // gRPC address.
  absl::StatusOr<std::unique_ptr<Listener>> listener = Listener::Start(
      "::", 0, [this](Socket& socket) { ServeLeft(socket); },
      std::move(tls_server), std::min(l.timeout_s, kMaxHandshakeS));
  if (!listener.ok()) return listener.status();
  listener_ = *std::move(listener);
  l.receiver->SetDataPlanePort(listener_->port());
  return absl::OkStatus();
}

absl::Status TcpRingTransport::Reform(int rank, int num_ranks) {
  link_.rank = rank;
  link_.num_ranks = num_ranks;
  Reset();
  if (num_ranks > 1 && listener_ == nullptr) return StartListener();
  return absl::OkStatus();
}

void TcpRingTransport::SetRight(const std::string& address,
                                const std::string& name) {
  right_address_ = address;
  right_name_ = name;
  right_port_ = 0;
  right_ = Collective::NewStub(MakeChannel(address, link_.security));
}

void TcpRingTransport::Reset() {
  // A restarted neighbour listens on a new data plane port.
  right_port_ = 0;
  absl::MutexLock lock(&right_mu_);
  right_socket_.Close();
}

void TcpRingTransport::ShutDown() {
  absl::MutexLock lock(&right_mu_);
  shut_down_ = true;
  right_socket_.Shutdown();  // wakes a write or a read in Send
}

void TcpRingTransport::ServeLeft(Socket& socket) {
  socket.SetTimeout(std::min(link_.timeout_s, kMaxHandshakeS)).IgnoreError();
  if (absl::Status s =
          AcceptDataPlaneHandshake(socket, link_.security.job_token);
      !s.ok()) {
    LOG(WARNING) << "ring all-reduce data plane: connection refused: " << s;
    return;
  }
  // A call under way must make progress; a stall past the caller's
  // deadline ends it from the calling thread (RingReceiver::End).
  socket.SetTimeout(link_.timeout_s).IgnoreError();
  link_.receiver->ServeTcp(socket);
}

absl::StatusOr<Socket> TcpRingTransport::ConnectRight(absl::Time deadline) {
  if (right_port_ == 0) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    DataPlaneRequest request;
    DataPlaneReply reply;
    grpc::Status status = right_->DataPlane(&context, request, &reply);
    if (!status.ok()) return FromGrpcStatus(status, "Collective.DataPlane");
    if (reply.port() <= 0) {
      return absl::FailedPreconditionError(
          "it has no TCP data plane (all ranks must use one --data_plane)");
    }
    right_port_ = reply.port();
  }
  std::string host;
  int grpc_port = 0;
  if (absl::Status s = SplitHostPort(right_address_, &host, &grpc_port);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Socket> socket =
      Socket::Connect(host, right_port_, SecondsLeft(deadline));
  if (!socket.ok()) {
    right_port_ = 0;  // it may have restarted elsewhere: ask again next time
    return socket.status();
  }
  if (tls_client_ != nullptr) {
    socket->SetTimeout(std::min(SecondsLeft(deadline), kMaxHandshakeS))
        .IgnoreError();
    const std::string& name = link_.security.tls_target_name_override;
    if (absl::Status s =
            tls_client_->Connect(*socket, name.empty() ? host : name);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s =
          OfferDataPlaneHandshake(*socket, link_.security.job_token);
      !s.ok()) {
    return s;
  }
  // Writes may wait on the receiver (it reads a call only once it has
  // begun it), but not past the deadline.
  socket->SetTimeout(SecondsLeft(deadline)).IgnoreError();
  return socket;
}

// One connection serves call after call: a connection and its handshake
// per call cost more than a small buffer's transfer. A kept one the
// neighbour closed is replaced before anything is written to it.
absl::Status TcpRingTransport::KeepRightConnected(absl::Time deadline) {
  {
    absl::MutexLock lock(&right_mu_);
    if (shut_down_) {
      return absl::CancelledError("ring all-reduce: this rank is stopping");
    }
  }
  if (right_socket_.valid() && right_socket_.IdleAndOpen()) {
    right_socket_.SetTimeout(SecondsLeft(deadline)).IgnoreError();
    return absl::OkStatus();
  }
  CloseRight();
  absl::StatusOr<Socket> connected = ConnectRight(deadline);
  if (!connected.ok()) return connected.status();
  absl::MutexLock lock(&right_mu_);
  right_socket_ = *std::move(connected);
  ++connections_opened_;
  // A ShutDown that came while it connected found nothing to shut down.
  if (shut_down_) right_socket_.Shutdown();
  return absl::OkStatus();
}

absl::Status TcpRingTransport::Send(RingCall* call,
                                    absl::Span<const float> data,
                                    absl::Time deadline) {
  const std::string peer = absl::StrCat("ring all-reduce call ",
                                        call->generation, ": ", right_name_);
  // Errors of the connection name the peer, as the gRPC path does.
  auto named = [&](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrCat(peer, " data plane: ", s.message()));
  };
  if (absl::Status connected = KeepRightConnected(deadline); !connected.ok()) {
    return link_.receiver->Fail(call, named(connected));
  }
  Socket& socket = right_socket_;

  const RingSchedule& s = *call->schedule;
  const int64_t chunk_elements = link_.chunk_elements;
  char raw[kFrameHeaderBytes];
  FrameHeader header;
  header.op = FrameOp::kRingHeader;
  header.a = static_cast<int64_t>(call->generation);
  header.b = s.num_elements();
  header.count = static_cast<uint32_t>(link_.num_ranks);
  header.bytes = kRingHeaderPayloadBytes;
  int64_t sender_rank = link_.rank;
  EncodeFrameHeader(header, raw);
  iovec parts[2] = {{raw, sizeof(raw)}, {&sender_rank, sizeof(sender_rank)}};
  absl::Status status = socket.WriteAll(parts, /*more=*/true);
  for (int step = 0; status.ok() && step < s.num_steps(); ++step) {
    const int segment = s.SendSegment(step);
    const int64_t begin = s.SegmentBegin(segment);
    const int64_t size = s.SegmentSize(segment);
    for (int64_t done = 0; status.ok() && done < size;) {
      const int64_t n = std::min(chunk_elements, size - done);
      // From step 1 on, the segment sent is the one received a step
      // before: forward each piece once it is reduced (or copied) here.
      if (step > 0) {
        if (absl::Status w =
                link_.receiver->WaitReceived(call, step - 1, done + n, deadline,
                                             /*stop_when_send_ends=*/false);
            !w.ok()) {
          CloseRight();  // tells the right neighbour
          return w;      // the call's first error
        }
      }
      FrameHeader chunk;
      chunk.op = FrameOp::kRingChunk;
      chunk.flags = static_cast<uint16_t>(segment);
      chunk.count = static_cast<uint32_t>(step);
      chunk.a = static_cast<int64_t>(call->generation);
      chunk.b = begin + done;
      chunk.bytes = n * static_cast<int64_t>(sizeof(float));
      EncodeFrameHeader(chunk, raw);
      // The values go from the buffer to the socket without a copy.
      const iovec chunk_parts[2] = {
          {raw, sizeof(raw)},
          {const_cast<float*>(data.data() + begin + done),
           static_cast<size_t>(chunk.bytes)}};
      status = socket.WriteAll(chunk_parts);
      done += n;
    }
  }
  status = AwaitReply(socket, status);
  // After an error the connection is in an unknown state.
  if (!status.ok()) CloseRight();
  // The first error of the call wins: a local one or the right
  // neighbour's.
  return link_.receiver->Fail(call, status.ok() ? status : named(status));
}

}  // namespace tessera
