// RingReceiver's data plane side (ring_receiver.h, ServeTcp): the
// Exchange stream's state machine on a blocking connection thread.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data_plane/frame.h"
#include "common/data_plane/socket.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/transport_limits.h"
#include "worker/collective/ring_receiver.h"
#include "worker/collective/ring_wire.h"

namespace tessera {
namespace {

// One chunk's frame and its bytes; InvalidArgument for a frame that is not
// a chunk, the socket's error for a connection that ended.
absl::Status ReadChunk(Socket& socket, FrameHeader* frame,
                       std::vector<char>* buffer) {
  absl::Status status = ReadFrameHeader(socket, frame);
  if (status.ok() && (frame->op != FrameOp::kRingChunk || frame->bytes < 0 ||
                      frame->bytes > kMaxChunkBytes)) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "ring all-reduce: ", "a frame of op ", static_cast<int>(frame->op),
        " and ", frame->bytes, " bytes where a chunk belongs"));
  }
  if (status.ok()) {
    buffer->resize(frame->bytes);
    status = socket.ReadFull(buffer->data(), buffer->size());
  }
  return status;
}

// InvalidArgument unless the chunk of `bytes` is the one `call` expects
// next from `left`: its call, step, segment and offset, whole floats, and
// no more than the segment holds.
absl::Status CheckNextChunk(const RingCall& call, const FrameHeader& frame,
                            size_t bytes, uint64_t generation, int rank,
                            const std::string& left) {
  const RingSchedule& s = *call.schedule;
  const int step = call.recv_step;
  const int segment = s.RecvSegment(step);
  const int64_t expected_offset = s.SegmentBegin(segment) + call.recv_done;
  const int64_t count = static_cast<int64_t>(bytes / sizeof(float));
  if (static_cast<uint64_t>(frame.a) != generation ||
      frame.count != static_cast<uint32_t>(step) || frame.flags != segment ||
      frame.b != expected_offset || bytes % sizeof(float) != 0 || count == 0 ||
      call.recv_done + count > s.SegmentSize(segment)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring all-reduce: ", left, " sent call ", frame.a, " step ",
        frame.count, " segment ", frame.flags, " at element ", frame.b, " (",
        bytes, " bytes) where rank ", rank, " expected call ", generation,
        " step ", step, " segment ", segment, " at element ", expected_offset));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* RingReceiver::DataPlane(
    grpc::CallbackServerContext* context, const DataPlaneRequest* /*request*/,
    DataPlaneReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status s = auth_.Check(*context, "Collective.DataPlane"); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  {
    absl::MutexLock lock(&mu_);
    reply->set_port(data_plane_port_);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void RingReceiver::SetDataPlanePort(int port) {
  absl::MutexLock lock(&mu_);
  data_plane_port_ = port;
}

void RingReceiver::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  cv_.SignalAll();
}

RingCall* RingReceiver::TcpCallLocked(uint64_t generation,
                                      const Socket* socket) const {
  if (active_ == nullptr || active_->generation != generation ||
      active_->tcp != socket) {
    return nullptr;
  }
  return active_;
}

void RingReceiver::ServeTcp(Socket& socket) {
  // The left neighbour keeps its connection from call to call; one that
  // failed is closed on both sides.
  while (ServeTcpCall(socket)) {
  }
}

bool RingReceiver::ServeTcpCall(Socket& socket) {
  FrameHeader frame;
  absl::Status status = ReadNextFrameHeader(socket, &frame);
  if (!status.ok()) return false;  // nothing was asked: nobody to answer
  int64_t sender_rank = -1;
  if (frame.op != FrameOp::kRingHeader ||
      frame.bytes != kRingHeaderPayloadBytes) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "ring all-reduce: rank ", rank_, " expected a call header, got op ",
        static_cast<int>(frame.op)));
  } else {
    status = socket.ReadFull(&sender_rank, sizeof(sender_rank));
    if (!status.ok()) return false;
  }
  if (status.ok()) {
    CollectiveChunk header;
    header.set_generation(static_cast<uint64_t>(frame.a));
    header.set_sender_rank(static_cast<int32_t>(sender_rank));
    header.set_num_ranks(static_cast<int32_t>(frame.count));
    header.set_num_elements(frame.b);
    absl::StatusOr<uint64_t> generation = AttachTcp(header, &socket);
    status =
        generation.ok() ? ReceiveTcp(socket, *generation) : generation.status();
  }
  if (status.ok()) {
    FrameHeader reply;
    reply.op = FrameOp::kRingReply;
    char raw[kFrameHeaderBytes];
    EncodeFrameHeader(reply, raw);
    return socket.WriteFull(raw, sizeof(raw)).ok();
  }
  if (status.code() != absl::StatusCode::kUnavailable) {
    // UNAVAILABLE: the connection itself broke, or the call was given up
    // here and the connection shut (the sender hears of that as a cut).
    WriteErrorReply(socket, FrameOp::kRingReply, status).IgnoreError();
  }
  return false;
}

absl::StatusOr<uint64_t> RingReceiver::AttachTcp(const CollectiveChunk& header,
                                                 Socket* socket) {
  const uint64_t generation = header.generation();
  absl::MutexLock lock(&mu_);
  if (header.sender_rank() != (rank_ + num_ranks_ - 1) % num_ranks_ ||
      header.num_ranks() != num_ranks_) {
    absl::Status error = absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: rank ", rank_, " of ", num_ranks_,
                     " expected its left neighbour ", left_name_,
                     " but got a connection from rank ", header.sender_rank(),
                     " of ", header.num_ranks()));
    if (active_ != nullptr) FailLocked(active_, error);
    return error;
  }
  if (generation == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce: ", left_name_,
                     " opened a connection for call 0; calls count from 1"));
  }
  // Parked: wait, unread, until that call begins (or a later one).
  while (!stopping_ && begun_generation_ < generation) cv_.Wait(&mu_);
  if (stopping_) {
    return absl::UnavailableError(
        absl::StrCat("ring all-reduce: rank ", rank_, " is stopping"));
  }
  if (active_ != nullptr && active_->generation == generation) {
    absl::Status error;
    if (active_->reactor != nullptr || active_->tcp != nullptr) {
      error = absl::AlreadyExistsError(
          absl::StrCat("ring all-reduce: a second stream from ", left_name_,
                       " for call ", generation));
    } else {
      error = CheckHeader(header, *active_);
    }
    if (!error.ok()) {
      FailLocked(active_, error);
      return error;
    }
    AdvanceLocked(active_);  // an empty buffer is complete
    cv_.SignalAll();
    if (active_->recv_step == active_->schedule->num_steps()) return 0;
    active_->tcp = socket;
    return generation;
  }
  if (generation == failed_generation_) return failure_;
  return absl::FailedPreconditionError(absl::StrCat(
      "ring all-reduce: rank ", rank_, " got a stream for call ", generation,
      " from ", left_name_, " but is at call ", begun_generation_));
}

absl::Status RingReceiver::ReceiveTcp(Socket& socket, uint64_t generation) {
  std::vector<char> buffer;
  if (generation == 0) return absl::OkStatus();  // nothing to receive
  while (true) {
    FrameHeader frame;
    absl::Status status = ReadChunk(socket, &frame, &buffer);
    RingCall* call = nullptr;
    float* dst = nullptr;
    bool reduce = false;
    int64_t count = 0;
    {
      absl::MutexLock lock(&mu_);
      call = TcpCallLocked(generation, &socket);
      if (call == nullptr) {
        return absl::UnavailableError("ring all-reduce: the call ended");
      }
      if (!status.ok()) {
        if (status.code() != absl::StatusCode::kInvalidArgument) {
          status = absl::UnavailableError(absl::StrCat(
              "ring all-reduce: the connection from ", left_name_, " for call ",
              generation,
              " ended before all data arrived (peer failed or cancelled): ",
              status.message()));
        } else {
          status = absl::InvalidArgumentError(
              absl::StrCat(status.message(), " from ", left_name_));
        }
        FailLocked(call, status);
        call->tcp = nullptr;
        return status;
      }
      status = CheckNextChunk(*call, frame, buffer.size(), generation, rank_,
                              left_name_);
      if (!status.ok()) {
        FailLocked(call, status);
        call->tcp = nullptr;
        return status;
      }
      count = static_cast<int64_t>(buffer.size() / sizeof(float));
      dst = call->data + frame.b;
      reduce = call->schedule->Reduces(call->recv_step);
      ++call->tcp_busy;
    }
    // The arithmetic runs outside the mutex: End() waits for tcp_busy.
    const char* src = buffer.data();
    ring_internal::ApplyChunk(src, count, reduce, dst);
    absl::MutexLock lock(&mu_);
    // `call` lives on: End() waits for tcp_busy.
    --call->tcp_busy;
    call->recv_done += count;
    AdvanceLocked(call);
    cv_.SignalAll();
    if (call->recv_step == call->schedule->num_steps()) {
      call->tcp = nullptr;  // received: End has nothing to shut
      return absl::OkStatus();
    }
  }
}

}  // namespace tessera
