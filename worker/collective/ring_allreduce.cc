#include "worker/collective/ring_allreduce.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/transport_limits.h"
#include "worker/collective/ring_grpc_transport.h"
#include "worker/collective/ring_tcp_transport.h"
#include "worker/collective/ring_wire.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<RingAllReduce>> RingAllReduce::Create(
    int rank, int num_ranks, RingAllReduceOptions options) {
  if (num_ranks < 1 || rank < 0 || rank >= num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring all-reduce: rank ", rank, " of ", num_ranks, " does not exist"));
  }
  if (options.chunk_bytes < 1 || options.chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: chunk_bytes ", options.chunk_bytes,
                     " is outside [1, ", kMaxChunkBytes, "]"));
  }
  if (!(options.timeout_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring all-reduce: timeout_s must be > 0, got ", options.timeout_s));
  }
  if (options.data_plane == DataPlaneKind::kTcp &&
      num_ranks > kMaxRingTcpRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: the TCP data plane takes at most ",
                     kMaxRingTcpRanks, " ranks, not ", num_ranks));
  }
  std::unique_ptr<RingAllReduce> ring(
      new RingAllReduce(rank, num_ranks, options));
  RingLink link;
  link.rank = rank;
  link.num_ranks = num_ranks;
  link.chunk_elements = std::clamp<int64_t>(
      options.chunk_bytes / static_cast<int64_t>(sizeof(float)), 1,
      kMaxChunkBytes / sizeof(float));
  link.timeout_s = options.timeout_s;
  link.security = options.security;
  link.receiver = ring->receiver_.get();
  // The one place the transport is chosen.
  if (options.data_plane == DataPlaneKind::kTcp) {
    absl::StatusOr<std::unique_ptr<TcpRingTransport>> tcp =
        TcpRingTransport::Start(std::move(link));
    if (!tcp.ok()) return tcp.status();
    ring->transport_ = *std::move(tcp);
  } else {
    ring->transport_ = std::make_unique<GrpcRingTransport>(std::move(link));
  }
  return ring;
}

RingAllReduce::RingAllReduce(int rank, int num_ranks,
                             RingAllReduceOptions options)
    : rank_(rank),
      num_ranks_(num_ranks),
      options_(options),
      // The receiver names the left neighbour in its errors; SetPeers adds
      // its address.
      receiver_(std::make_unique<RingReceiver>(
          rank, num_ranks,
          absl::StrCat("rank ", (rank + num_ranks - 1) % num_ranks,
                       " (left neighbour)"),
          RpcAuth(options.security.job_token))) {}

RingAllReduce::~RingAllReduce() {
  receiver_->Stop();
  transport_.reset();  // its listener's threads use the receiver
}

void RingAllReduce::RegisterService(grpc::ServerBuilder* builder) {
  builder->RegisterService(receiver_.get());
}

absl::Status RingAllReduce::SetPeers(std::vector<std::string> peers) {
  if (static_cast<int>(peers.size()) != num_ranks_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: ", peers.size(), " peer addresses for ",
                     num_ranks_, " ranks"));
  }
  peers_ = std::move(peers);
  receiver_->SetLeftName(PeerName((rank_ + num_ranks_ - 1) % num_ranks_));
  if (num_ranks_ > 1) {
    const int right = (rank_ + 1) % num_ranks_;
    transport_->SetRight(peers_[right], PeerName(right));
  }
  return absl::OkStatus();
}

std::string RingAllReduce::PeerName(int rank) const {
  return absl::StrCat("rank ", rank, " (", peers_[rank], ")");
}

void RingAllReduce::Abort(const absl::Status& why) { receiver_->Abort(why); }

void RingAllReduce::Shutdown(const absl::Status& why) {
  receiver_->ShutDown(why);  // first: the call's error is `why`
  transport_->ShutDown();
}

absl::Status RingAllReduce::Restart(uint64_t epoch) {
  if (epoch < generation_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: rank ", rank_, " cannot start over at ",
                     epoch, ": it already made ", generation_, " calls"));
  }
  generation_ = epoch;
  transport_->Reset();
  receiver_->ClearAbort();
  return absl::OkStatus();
}

absl::Status RingAllReduce::Reform(int rank, std::vector<std::string> peers,
                                   uint64_t epoch) {
  const int n = static_cast<int>(peers.size());
  if (n < 1 || rank < 0 || rank >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring all-reduce: cannot re-form as rank ", rank, " of ", n));
  }
  if (options_.data_plane == DataPlaneKind::kTcp && n > kMaxRingTcpRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: the TCP data plane takes at most ",
                     kMaxRingTcpRanks, " ranks, not ", n));
  }
  if (epoch < generation_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: rank ", rank_, " cannot re-form at ",
                     epoch, ": it already made ", generation_, " calls"));
  }
  if (absl::Status s = transport_->Reform(rank, n); !s.ok()) return s;
  rank_ = rank;
  num_ranks_ = n;
  peers_ = std::move(peers);
  const int left = (rank + n - 1) % n;
  receiver_->Reform(rank, n, PeerName(left));
  if (n > 1) {
    const int right = (rank + 1) % n;
    transport_->SetRight(peers_[right], PeerName(right));
  }
  generation_ = epoch;
  receiver_->ClearAbort();
  return absl::OkStatus();
}

absl::Status RingAllReduce::AllReduce(absl::Span<float> data) {
  if (num_ranks_ == 1) return absl::OkStatus();
  if (peers_.empty()) {
    return absl::FailedPreconditionError(
        "ring all-reduce: RegisterService and SetPeers come before AllReduce");
  }
  // Given up (Abort) until Restart: no stream goes out.
  if (absl::Status aborted = receiver_->aborted(); !aborted.ok()) {
    return aborted;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(options_.timeout_s);
  const RingSchedule schedule(num_ranks_, rank_,
                              static_cast<int64_t>(data.size()));
  RingCall call(++generation_, &schedule, data.data());
  receiver_->Begin(&call);
  absl::Status status = transport_->Send(&call, data, deadline);
  if (status.ok()) {
    status = receiver_->WaitReceived(&call, -1, 0, deadline,
                                     /*stop_when_send_ends=*/false);
  }
  receiver_->End(&call, status);
  return status;
}

}  // namespace tessera
