#include "worker/collective/ring_receiver.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data_plane/socket.h"
#include "common/rpc/grpc_status.h"

namespace tessera {

namespace ring_internal {

void ApplyChunk(const char* src, int64_t count, bool reduce, float* dst) {
  if (!reduce) {
    std::memcpy(dst, src, count * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    float v;
    std::memcpy(&v, src + i * sizeof(float), sizeof(float));
    dst[i] = v + dst[i];
  }
}

}  // namespace ring_internal

// The server side of one Exchange stream. Life cycle: reads the header;
// then either attaches to the active call of that generation, or parks
// (no read in flight) until Begin() of it, or ends a stale stream. While
// attached it reads, applies each chunk and reads again, until the
// sender half-closes.
//
// Finish is called exactly once, by whoever sets finish_claimed_ under the
// receiver's mutex, and outside that mutex. `busy_` counts reactions that
// are between reading the call's state and their last StartRead; End()
// waits for it to drop to zero before it detaches the call, so that
// neither the buffer nor a finished stream is touched afterwards.
class RingExchangeReactor final
    : public grpc::ServerBidiReactor<CollectiveChunk, ExchangeResponse> {
 public:
  enum class State { kHeader, kParked, kAttached };

  explicit RingExchangeReactor(RingReceiver* owner) : owner_(owner) {
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  friend class RingReceiver;

  void OnHeader();
  void OnData();
  void OnEnd();
  // Claims the right to finish (REQUIRES owner_->mu_); false when someone
  // else already has.
  bool ClaimFinish() {
    if (finish_claimed_) return false;
    finish_claimed_ = true;
    return true;
  }
  void Idle() {
    absl::MutexLock lock(&owner_->mu_);
    --busy_;
    owner_->cv_.SignalAll();
  }

  RingReceiver* const owner_;
  CollectiveChunk chunk_;   // the message being read
  CollectiveChunk header_;  // the stream's first message
  // Guarded by owner_->mu_.
  State state_ = State::kHeader;
  RingCall* call_ = nullptr;
  int busy_ = 0;
  bool finish_claimed_ = false;
  bool received_all_ = false;
};

// A stream refused before anything is read from it.
class RefusedExchangeReactor final
    : public grpc::ServerBidiReactor<CollectiveChunk, ExchangeResponse> {
 public:
  explicit RefusedExchangeReactor(const grpc::Status& status) {
    Finish(status);
  }
  void OnDone() override { delete this; }
};

RingReceiver::RingReceiver(int rank, int num_ranks, std::string left_name,
                           RpcAuth auth)
    : rank_(rank),
      num_ranks_(num_ranks),
      auth_(std::move(auth)),
      left_name_(std::move(left_name)) {}

grpc::ServerBidiReactor<CollectiveChunk, ExchangeResponse>*
RingReceiver::Exchange(grpc::CallbackServerContext* context) {
  if (grpc::Status s = auth_.Check(*context, "Collective.Exchange"); !s.ok()) {
    return new RefusedExchangeReactor(s);
  }
  return new RingExchangeReactor(this);
}

void RingExchangeReactor::OnReadDone(bool ok) {
  if (!ok) {
    OnEnd();
  } else if (state_ == State::kHeader) {  // only this thread changes it here
    OnHeader();
  } else {
    OnData();
  }
}

void RingExchangeReactor::OnHeader() {
  header_ = std::move(chunk_);
  const uint64_t generation = header_.generation();
  absl::Status error;
  bool read_on = false;
  {
    absl::MutexLock lock(&owner_->mu_);
    RingCall* active = owner_->active_;
    if (finish_claimed_) return;
    if (header_.sender_rank() !=
            (owner_->rank_ + owner_->num_ranks_ - 1) % owner_->num_ranks_ ||
        header_.num_ranks() != owner_->num_ranks_) {
      error = absl::InvalidArgumentError(
          absl::StrCat("ring all-reduce: rank ", owner_->rank_, " of ",
                       owner_->num_ranks_, " expected its left neighbour ",
                       owner_->left_name_, " but got a stream from rank ",
                       header_.sender_rank(), " of ", header_.num_ranks()));
      if (active != nullptr) owner_->FailLocked(active, error);
    } else if (generation == 0) {
      // Calls count from 1: no call has generation 0, and failed_generation_
      // is 0 while no call has failed.
      error = absl::InvalidArgumentError(
          absl::StrCat("ring all-reduce: ", owner_->left_name_,
                       " opened a stream for call 0; calls count from 1"));
    } else if (active != nullptr && active->generation == generation) {
      if (active->reactor != nullptr) {
        error = absl::AlreadyExistsError(
            absl::StrCat("ring all-reduce: a second stream from ",
                         owner_->left_name_, " for call ", generation));
      } else {
        error = owner_->CheckHeader(header_, *active);
      }
      if (error.ok()) {
        state_ = State::kAttached;
        call_ = active;
        active->reactor = this;
        RingReceiver::AdvanceLocked(active);  // an empty buffer is complete
        received_all_ = active->recv_step == active->schedule->num_steps();
        owner_->cv_.SignalAll();
        ++busy_;
        read_on = true;
      } else {
        owner_->FailLocked(active, error);
      }
    } else if (generation > owner_->begun_generation_ &&
               owner_->parked_.count(generation) == 0) {
      state_ = State::kParked;
      owner_->parked_[generation] = this;
      return;  // Begin() of that generation reads on
    } else if (generation == owner_->failed_generation_) {
      error = owner_->failure_;
    } else {
      error = absl::FailedPreconditionError(absl::StrCat(
          "ring all-reduce: rank ", owner_->rank_, " got a stream for call ",
          generation, " from ", owner_->left_name_, " but is at call ",
          owner_->begun_generation_));
    }
    if (!error.ok() && !ClaimFinish()) return;
  }
  if (read_on) {
    StartRead(&chunk_);
    Idle();
    return;
  }
  Finish(ToGrpcStatus(error));
}

void RingExchangeReactor::OnData() {
  float* dst = nullptr;
  bool reduce = false;
  int64_t count = 0;
  absl::Status error;
  {
    absl::MutexLock lock(&owner_->mu_);
    if (finish_claimed_) return;
    RingCall* call = call_;
    if (call == nullptr) {
      error = absl::InvalidArgumentError(absl::StrCat(
          "ring all-reduce: ", owner_->left_name_, " sent more data than call ",
          header_.generation(), " has"));
    } else {
      const RingSchedule& s = *call->schedule;
      const int step = call->recv_step;
      const int segment = step < s.num_steps() ? s.RecvSegment(step) : -1;
      const int64_t expected_offset =
          segment < 0 ? -1 : s.SegmentBegin(segment) + call->recv_done;
      const size_t bytes = chunk_.data().size();
      count = static_cast<int64_t>(bytes / sizeof(float));
      if (chunk_.generation() != call->generation || step >= s.num_steps() ||
          chunk_.step() != step || chunk_.segment() != segment ||
          chunk_.offset() != expected_offset || bytes % sizeof(float) != 0 ||
          count == 0 || call->recv_done + count > s.SegmentSize(segment)) {
        error = absl::InvalidArgumentError(absl::StrCat(
            "ring all-reduce: ", owner_->left_name_, " sent call ",
            chunk_.generation(), " step ", chunk_.step(), " segment ",
            chunk_.segment(), " at element ", chunk_.offset(), " (", bytes,
            " bytes) where rank ", owner_->rank_, " expected call ",
            call->generation, " step ", step, " segment ", segment,
            " at element ", expected_offset));
        owner_->FailLocked(call, error);
      } else {
        dst = call->data + chunk_.offset();
        reduce = s.Reduces(step);
        ++busy_;
      }
    }
    if (!error.ok() && !ClaimFinish()) return;
  }
  if (!error.ok()) {
    Finish(ToGrpcStatus(error));
    return;
  }
  // The arithmetic runs outside the mutex: End() waits for busy_.
  const char* src = chunk_.data().data();
  ring_internal::ApplyChunk(src, count, reduce, dst);
  bool read_on = false;
  {
    absl::MutexLock lock(&owner_->mu_);
    call_->recv_done += count;
    RingReceiver::AdvanceLocked(call_);
    received_all_ = call_->recv_step == call_->schedule->num_steps();
    owner_->cv_.SignalAll();
    read_on = !finish_claimed_;
  }
  // Read on even after the last chunk: the sender's half-close ends it.
  if (read_on) StartRead(&chunk_);
  Idle();
}

void RingExchangeReactor::OnEnd() {
  absl::Status status;
  {
    absl::MutexLock lock(&owner_->mu_);
    if (!ClaimFinish()) return;
    if (state_ == State::kParked) {
      owner_->parked_.erase(header_.generation());
    }
    if (!received_all_) {
      status = absl::UnavailableError(absl::StrCat(
          "ring all-reduce: the stream from ", owner_->left_name_, " for call ",
          header_.generation(),
          " ended before all data arrived (peer failed or cancelled)"));
      if (call_ != nullptr) owner_->FailLocked(call_, status);
    }
  }
  Finish(ToGrpcStatus(status));
}

void RingExchangeReactor::OnCancel() {
  // A parked stream has no read in flight to notice the cancellation.
  {
    absl::MutexLock lock(&owner_->mu_);
    if (state_ != State::kParked || !ClaimFinish()) return;
    owner_->parked_.erase(header_.generation());
  }
  Finish(grpc::Status::CANCELLED);
}

void RingExchangeReactor::OnDone() {
  {
    absl::MutexLock lock(&owner_->mu_);
    if (state_ == State::kParked) {
      auto it = owner_->parked_.find(header_.generation());
      if (it != owner_->parked_.end() && it->second == this) {
        owner_->parked_.erase(it);
      }
    }
    if (call_ != nullptr && call_->reactor == this) call_->reactor = nullptr;
    owner_->cv_.SignalAll();
  }
  delete this;
}

absl::Status RingReceiver::CheckHeader(const CollectiveChunk& header,
                                       const RingCall& call) const {
  if (header.num_elements() != call.schedule->num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce call ", call.generation, ": ", left_name_,
                     " has ", header.num_elements(), " elements but rank ",
                     rank_, " has ", call.schedule->num_elements(),
                     " (all ranks must reduce buffers of ", "one size)"));
  }
  return absl::OkStatus();
}

void RingReceiver::Begin(RingCall* call) {
  RingExchangeReactor* attach = nullptr;
  std::vector<std::pair<RingExchangeReactor*, absl::Status>> refuse;
  {
    absl::MutexLock lock(&mu_);
    active_ = call;
    begun_generation_ = call->generation;
    if (!aborted_.ok()) FailLocked(call, aborted_);
    cv_.SignalAll();  // data plane connections parked in AttachTcp
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (it->first < call->generation) {
        if (it->second->ClaimFinish()) {
          refuse.emplace_back(
              it->second, absl::FailedPreconditionError(absl::StrCat(
                              "ring all-reduce: rank ", rank_, " is at call ",
                              call->generation, "; a stream of call ",
                              it->first, " came too late")));
        }
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
    auto it = parked_.find(call->generation);
    if (it != parked_.end()) {
      RingExchangeReactor* r = it->second;
      parked_.erase(it);
      absl::Status error = CheckHeader(r->header_, *call);
      if (!error.ok()) {
        FailLocked(call, error);
        if (r->ClaimFinish()) refuse.emplace_back(r, error);
      } else {
        r->state_ = RingExchangeReactor::State::kAttached;
        r->call_ = call;
        call->reactor = r;
        AdvanceLocked(call);
        r->received_all_ = call->recv_step == call->schedule->num_steps();
        ++r->busy_;
        attach = r;
      }
    }
  }
  for (auto& [r, status] : refuse) r->Finish(ToGrpcStatus(status));
  if (attach != nullptr) {
    attach->StartRead(&attach->chunk_);
    attach->Idle();
  }
}

void RingReceiver::AdvanceLocked(RingCall* call) {
  const RingSchedule& s = *call->schedule;
  while (call->recv_step < s.num_steps() &&
         call->recv_done == s.SegmentSize(s.RecvSegment(call->recv_step))) {
    ++call->recv_step;
    call->recv_done = 0;
  }
}

bool RingReceiver::ReceivedLocked(const RingCall& call, int step,
                                  int64_t elements) {
  if (step < 0) return call.recv_step >= call.schedule->num_steps();
  return call.recv_step > step ||
         (call.recv_step == step && call.recv_done >= elements);
}

void RingReceiver::SendEnded(RingCall* call) {
  absl::MutexLock lock(&mu_);
  call->send_ended = true;
  cv_.SignalAll();
}

absl::Status RingReceiver::WaitReceived(RingCall* call, int step,
                                        int64_t elements, absl::Time deadline,
                                        bool stop_when_send_ends) {
  absl::MutexLock lock(&mu_);
  while (call->error.ok() && !ReceivedLocked(*call, step, elements)) {
    if (stop_when_send_ends && call->send_ended) {
      return absl::CancelledError(
          "ring all-reduce: the stream to the right neighbour ended");
    }
    if (cv_.WaitWithDeadline(&mu_, deadline) &&
        !ReceivedLocked(*call, step, elements) && call->error.ok()) {
      const RingSchedule& s = *call->schedule;
      FailLocked(
          call, absl::DeadlineExceededError(absl::StrCat(
                    "ring all-reduce call ", call->generation, ": rank ", rank_,
                    " timed out waiting for ", left_name_, ": received step ",
                    call->recv_step, " of ", s.num_steps(), " (",
                    call->recv_done, " elements into its segment)")));
    }
  }
  return call->error;
}

absl::Status RingReceiver::Fail(RingCall* call, const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  FailLocked(call, status);
  return call->error;
}

void RingReceiver::SetLeftName(std::string left_name) {
  absl::MutexLock lock(&mu_);
  left_name_ = std::move(left_name);
}

void RingReceiver::Reform(int rank, int num_ranks, std::string left_name) {
  absl::MutexLock lock(&mu_);
  rank_ = rank;
  num_ranks_ = num_ranks;
  left_name_ = std::move(left_name);
}

void RingReceiver::Abort(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  aborted_ = why;
  if (active_ != nullptr) FailLocked(active_, why);
}

absl::Status RingReceiver::aborted() const {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

void RingReceiver::ClearAbort() {
  absl::MutexLock lock(&mu_);
  aborted_ = shut_down_;
}

void RingReceiver::ShutDown(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (shut_down_.ok()) shut_down_ = why;
  aborted_ = shut_down_;
  if (active_ != nullptr) FailLocked(active_, shut_down_);
}

void RingReceiver::FailLocked(RingCall* call, const absl::Status& status) {
  if (call->error.ok()) call->error = status;
  cv_.SignalAll();
}

void RingReceiver::End(RingCall* call, const absl::Status& outcome) {
  RingExchangeReactor* finish = nullptr;
  absl::Status failure;
  {
    absl::MutexLock lock(&mu_);
    if (active_ == call) active_ = nullptr;
    // No reaction may be using the buffer, or be about to read, once the
    // call is detached.
    while ((call->reactor != nullptr && call->reactor->busy_ > 0) ||
           call->tcp_busy > 0) {
      cv_.Wait(&mu_);
    }
    if (!outcome.ok()) {
      failed_generation_ = call->generation;
      failure_ = absl::AbortedError(
          absl::StrCat("ring all-reduce: rank ", rank_, " gave up call ",
                       call->generation, ": ", outcome.message()));
      failure = failure_;
    }
    if (call->tcp != nullptr) {
      // The connection's thread returns at its next read; on success it
      // has nothing left to read but its reply to send.
      if (!outcome.ok()) call->tcp->Shutdown();
      call->tcp = nullptr;
    }
    RingExchangeReactor* r = call->reactor;
    if (r != nullptr) {
      r->call_ = nullptr;
      call->reactor = nullptr;
      // On success the stream ends with the sender's half-close.
      if (!outcome.ok() && r->ClaimFinish()) finish = r;
    }
  }
  if (finish != nullptr) finish->Finish(ToGrpcStatus(failure));
}

}  // namespace tessera
