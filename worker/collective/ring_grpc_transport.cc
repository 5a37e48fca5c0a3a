// GrpcRingTransport: a call's chunks as one Collective.Exchange stream.
#include "worker/collective/ring_grpc_transport.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

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

  grpc::ClientContext* context() { return &context_; }

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

void GrpcRingTransport::SetRight(const std::string& address,
                                 const std::string& name) {
  right_name_ = name;
  right_ = Collective::NewStub(MakeChannel(address, link_.security));
}

absl::Status GrpcRingTransport::Send(RingCall* call,
                                     absl::Span<const float> data,
                                     absl::Time deadline) {
  const std::string peer =
      absl::StrCat("ring all-reduce call ", call->generation, ": ", right_name_,
                   " Exchange");
  const RingSchedule& s = *call->schedule;
  const int64_t chunk_elements = link_.chunk_elements;

  ExchangeStream stream(right_.get(), deadline, link_.receiver, call);
  // Registered for ShutDown, which cancels it (a cancelled stream's writes
  // and Finish return at once), until Finish has returned.
  {
    absl::MutexLock lock(&stream_mu_);
    if (shut_down_) stream.context()->TryCancel();
    stream_context_ = stream.context();
  }
  // Two messages in turn: one is filled while the other is on the wire.
  CollectiveChunk chunks[2];
  int next = 0;
  chunks[next].set_generation(call->generation);
  chunks[next].set_sender_rank(link_.rank);
  chunks[next].set_num_ranks(link_.num_ranks);
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
      if (step > 0 && !link_.receiver
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
  {
    absl::MutexLock lock(&stream_mu_);
    stream_context_ = nullptr;
  }
  // The first error of the call wins: a local one (which cancelled the
  // stream) or the right neighbour's.
  if (!status.ok())
    return link_.receiver->Fail(call, FromGrpcStatus(status, peer));
  return link_.receiver->Fail(call, absl::OkStatus());
}

void GrpcRingTransport::ShutDown() {
  absl::MutexLock lock(&stream_mu_);
  shut_down_ = true;
  if (stream_context_ != nullptr) stream_context_->TryCancel();
}

}  // namespace tessera
