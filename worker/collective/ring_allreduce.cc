#include "worker/collective/ring_allreduce.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_channel.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/transport_limits.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "worker/collective/ring_wire.h"

namespace tessera {
namespace {

// The client side of one Exchange stream, on gRPC's callback API. The
// calling thread writes; a read stays pending the whole time, so that the
// receiver ending the stream (on success or when it gives up) is noticed
// at once and reported to the call's waiters.
class ExchangeStream final
    : public grpc::ClientBidiReactor<CollectiveChunk, ExchangeResponse> {
 public:
  ExchangeStream(Collective::Stub* stub, absl::Time deadline,
                 RingReceiver* receiver, RingCall* call)
      : receiver_(receiver), call_(call) {
    context_.set_deadline(absl::ToChronoTime(deadline));
    stub->async()->Exchange(&context_, this);
    StartRead(&response_);
    AddHold();  // writes are started from outside reactions
    StartCall();
  }

  // Waits until the previous write is done, then starts writing `chunk`,
  // which must stay unchanged until the next Write or Finish returns.
  // False when the stream is broken (Finish says why).
  bool Write(const CollectiveChunk* chunk) {
    if (!WaitForWrite()) return false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = true;
    }
    StartWrite(chunk);
    return true;
  }

  // Half-closes the stream when `clean`, else cancels it; waits for its
  // end and returns its status.
  grpc::Status Finish(bool clean) {
    if (clean && WaitForWrite()) {
      StartWritesDone();
    } else {
      context_.TryCancel();
    }
    RemoveHold();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) broken_ = true;
  }

  // The receiver never writes: this is the end of the stream.
  void OnReadDone(bool ok) override { receiver_->SendEnded(call_); }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

 private:
  bool WaitForWrite() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](ExchangeStream* self) { return !self->writing_; }, this));
    return !broken_;
  }

  RingReceiver* const receiver_;
  RingCall* const call_;
  grpc::ClientContext context_;
  ExchangeResponse response_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

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
  if (options.data_plane == DataPlaneKind::kTcp && num_ranks > 1) {
    if (absl::Status s = ring->StartDataPlane(); !s.ok()) return s;
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
  listener_.reset();
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
  right_port_ = 0;
  if (num_ranks_ > 1) {
    right_ = Collective::NewStub(
        MakeChannel(peers_[(rank_ + 1) % num_ranks_], options_.security));
  }
  return absl::OkStatus();
}

std::string RingAllReduce::PeerName(int rank) const {
  return absl::StrCat("rank ", rank, " (", peers_[rank], ")");
}

void RingAllReduce::Abort(const absl::Status& why) { receiver_->Abort(why); }

absl::Status RingAllReduce::Restart(uint64_t epoch) {
  if (epoch < generation_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: rank ", rank_, " cannot start over at ",
                     epoch, ": it already made ", generation_, " calls"));
  }
  generation_ = epoch;
  // A restarted neighbour listens on a new data plane port.
  right_port_ = 0;
  right_socket_.Close();
  receiver_->ClearAbort();
  return absl::OkStatus();
}

absl::Status RingAllReduce::AllReduce(absl::Span<float> data) {
  if (num_ranks_ == 1) return absl::OkStatus();
  if (right_ == nullptr) {
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
  absl::Status status = options_.data_plane == DataPlaneKind::kTcp
                            ? SendTcp(&call, data, deadline)
                            : Send(&call, data, deadline);
  if (status.ok()) {
    status = receiver_->WaitReceived(&call, -1, 0, deadline,
                                     /*stop_when_send_ends=*/false);
  }
  receiver_->End(&call, status);
  return status;
}

int64_t RingAllReduce::ChunkElements() const {
  return std::clamp<int64_t>(
      options_.chunk_bytes / static_cast<int64_t>(sizeof(float)), 1,
      kMaxChunkBytes / sizeof(float));
}

absl::Status RingAllReduce::Send(RingCall* call, absl::Span<const float> data,
                                 absl::Time deadline) {
  const int right = (rank_ + 1) % num_ranks_;
  const std::string peer =
      absl::StrCat("ring all-reduce call ", call->generation, ": ",
                   PeerName(right), " Exchange");
  const RingSchedule& s = *call->schedule;
  const int64_t chunk_elements = ChunkElements();

  ExchangeStream stream(right_.get(), deadline, receiver_.get(), call);
  // Two messages in turn: one is filled while the other is on the wire.
  CollectiveChunk chunks[2];
  int next = 0;
  chunks[next].set_generation(call->generation);
  chunks[next].set_sender_rank(rank_);
  chunks[next].set_num_ranks(num_ranks_);
  chunks[next].set_num_elements(s.num_elements());
  bool clean = stream.Write(&chunks[next]);
  next ^= 1;
  for (int step = 0; clean && step < s.num_steps(); ++step) {
    const int segment = s.SendSegment(step);
    const int64_t begin = s.SegmentBegin(segment);
    const int64_t size = s.SegmentSize(segment);
    for (int64_t done = 0; clean && done < size;) {
      const int64_t n = std::min(chunk_elements, size - done);
      // From step 1 on, the segment sent is the one received a step
      // before: forward each piece once it is reduced (or copied) here.
      if (step > 0 && !receiver_
                           ->WaitReceived(call, step - 1, done + n, deadline,
                                          /*stop_when_send_ends=*/true)
                           .ok()) {
        clean = false;
        break;
      }
      CollectiveChunk& chunk = chunks[next];
      chunk.set_generation(call->generation);
      chunk.set_step(step);
      chunk.set_segment(segment);
      chunk.set_offset(begin + done);
      chunk.mutable_data()->assign(
          reinterpret_cast<const char*>(data.data() + begin + done),
          n * sizeof(float));
      clean = stream.Write(&chunk);
      next ^= 1;
      done += n;
    }
  }
  const grpc::Status status = stream.Finish(clean);
  // The first error of the call wins: a local one (which cancelled the
  // stream) or the right neighbour's.
  if (!status.ok()) return receiver_->Fail(call, FromGrpcStatus(status, peer));
  return receiver_->Fail(call, absl::OkStatus());
}

}  // namespace tessera
