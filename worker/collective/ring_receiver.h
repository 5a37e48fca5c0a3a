#ifndef TESSERA_WORKER_COLLECTIVE_RING_RECEIVER_H_
#define TESSERA_WORKER_COLLECTIVE_RING_RECEIVER_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/rpc/rpc_auth.h"
#include "proto/collective_service.grpc.pb.h"
#include "worker/collective/ring_schedule.h"

namespace tessera {

namespace ring_internal {

// What a received chunk does to its slice `dst` of the caller's tensor:
// on a reduce step dst[i] = received[i] + dst[i] (the partial sum of the
// ranks before, then this rank's own, in that order on every transport),
// else a copy. `src` holds count floats, possibly unaligned.
void ApplyChunk(const char* src, int64_t count, bool reduce, float* dst);

}  // namespace ring_internal

class RingExchangeReactor;
class Socket;

// One AllReduce call as the receiving side sees it: where the data goes
// and how far the stream from the left neighbour has got. Owned by the
// calling thread; the fields below `data` are guarded by the receiver's
// mutex.
struct RingCall {
  RingCall(uint64_t generation, const RingSchedule* schedule, float* data)
      : generation(generation), schedule(schedule), data(data) {}

  const uint64_t generation;
  const RingSchedule* const schedule;
  float* const data;

  // Receive progress: every step before recv_step is complete, and
  // recv_done elements of step recv_step's segment have arrived.
  int recv_step = 0;
  int64_t recv_done = 0;
  // The first error of the call, from either side.
  absl::Status error;
  // The stream to the right neighbour has ended (its receiver finished it).
  bool send_ended = false;
  RingExchangeReactor* reactor = nullptr;  // the stream from the left
  // Or the data plane connection from the left (ServeTcp), and how many of
  // its chunks are being applied outside the mutex.
  Socket* tcp = nullptr;
  int tcp_busy = 0;
};

// The receiving half of a ring all-reduce: the Collective service. It
// takes the stream that the left neighbour opens for each AllReduce call
// and reduces (or copies) every chunk into the call's buffer as it
// arrives, on gRPC's threads. A stream that comes before the local call
// has begun waits, unread (the sender's flow control holds it back), until
// Begin() of that generation.
//
// The calling thread uses Begin, WaitReceived, Fail and End; the service
// methods are gRPC's. A stream without the job's token is refused
// (UNAUTHENTICATED) before its first message is read.
//
// Thread safety: all methods may be called concurrently; at most one call
// is active at a time. The gRPC server the service is registered on must
// be shut down before the receiver is destroyed.
class RingReceiver final : public Collective::CallbackService {
 public:
  // `left_name` names the left neighbour in errors ("rank 2 (host:port)");
  // `auth` checks each stream's job token.
  RingReceiver(int rank, int num_ranks, std::string left_name, RpcAuth auth);
  // Renames it (once its address is known).
  void SetLeftName(std::string left_name);
  // The ring was re-formed: this is rank `rank` of `num_ranks` from the
  // next call on, and `left_name` its left neighbour. REQUIRES: no call
  // active.
  void Reform(int rank, int num_ranks, std::string left_name);
  RingReceiver(const RingReceiver&) = delete;
  RingReceiver& operator=(const RingReceiver&) = delete;

  // Makes `call` the active call and attaches the left neighbour's stream
  // for its generation if it already arrived. Streams of older
  // generations still waiting are ended with an error. While aborted, the
  // call fails at once.
  // REQUIRES: no call active; generations increase from call to call.
  void Begin(RingCall* call);

  // Blocks until `elements` elements of `step`'s segment (or all of it,
  // when `step` is the last) have been received, the call failed (its
  // error), or `deadline` passed (DeadlineExceeded naming the left
  // neighbour). step == -1 waits for the whole call. With
  // `stop_when_send_ends`, also returns (Cancelled) once SendEnded.
  absl::Status WaitReceived(RingCall* call, int step, int64_t elements,
                            absl::Time deadline, bool stop_when_send_ends);

  // Notes that the stream to the right neighbour has ended, and wakes the
  // waiters that asked for it.
  void SendEnded(RingCall* call);

  // Records an error of the sending side, so that waiters stop, and
  // returns the call's first error (which may be an earlier one).
  absl::Status Fail(RingCall* call, const absl::Status& status);

  // Fails the active call, if any, with `why` at once, and makes
  // aborted() return it until ClearAbort: the group gave this step up.
  void Abort(const absl::Status& why);
  absl::Status aborted() const;
  void ClearAbort();
  // As Abort, but ClearAbort does not end it: the process is stopping.
  // A waiter in WaitReceived returns `why` at once, not at its deadline.
  void ShutDown(const absl::Status& why);

  // Ends `call`: after it returns, nothing touches call->data any more.
  // When `outcome` is an error the stream from the left is ended with it.
  void End(RingCall* call, const absl::Status& outcome);

  // The same stream as a data plane connection (--data_plane=tcp;
  // worker/collective/ring_wire.h), whose token handshake is done: runs on
  // the connection's own thread, one call after another, until the
  // sender closes it or a call it carries is refused or fails. Same
  // checks, same errors, and the same answer to the sender (a reply frame
  // per call) as Exchange.
  void ServeTcp(Socket& socket);
  // The port DataPlane announces; 0 (the default): none.
  void SetDataPlanePort(int port);
  // Ends the ServeTcp connections that wait for a call; call before the
  // listener that serves them goes.
  void Stop();

  // Collective::CallbackService.
  grpc::ServerBidiReactor<CollectiveChunk, ExchangeResponse>* Exchange(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* DataPlane(grpc::CallbackServerContext* context,
                                      const DataPlaneRequest* request,
                                      DataPlaneReply* reply) override;

 private:
  friend class RingExchangeReactor;

  // The checks of a stream's header against the local call; OK or
  // InvalidArgument naming the left neighbour.
  absl::Status CheckHeader(const CollectiveChunk& header,
                           const RingCall& call) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ServeTcp's parts: waits for the call of `header` and attaches
  // `socket` to it (its generation, or an error for the sender); then
  // applies chunks until the call is received (OK) or fails. Generation
  // 0: the call has nothing to receive (attached and complete at once).
  absl::StatusOr<uint64_t> AttachTcp(const CollectiveChunk& header,
                                     Socket* socket);
  absl::Status ReceiveTcp(Socket& socket, uint64_t generation);
  // One call of ServeTcp's connection; false when the connection ends.
  bool ServeTcpCall(Socket& socket);
  // The active call, when it is `generation` and `socket` is attached to
  // it.
  RingCall* TcpCallLocked(uint64_t generation, const Socket* socket) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets call->error unless already set, and wakes every waiter.
  void FailLocked(RingCall* call, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves recv_step past complete (and empty) steps.
  static void AdvanceLocked(RingCall* call);
  static bool ReceivedLocked(const RingCall& call, int step, int64_t elements);

  // Changed by Reform only, under mu_, between calls: a stream's header is
  // checked under mu_, and the other reads name them in a call's errors.
  int rank_;
  int num_ranks_;
  const RpcAuth auth_;
  mutable absl::Mutex mu_;
  std::string left_name_ ABSL_GUARDED_BY(mu_);
  absl::CondVar cv_;  // progress, errors, reactors going idle
  RingCall* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The generation of the latest Begin; streams of older ones are stale.
  uint64_t begun_generation_ ABSL_GUARDED_BY(mu_) = 0;
  // The latest call that ended with an error, and why: the answer to a
  // stream of it that comes late. 0 (no call) until one fails; a stream
  // of generation 0 is refused before this is consulted.
  uint64_t failed_generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  // Streams of generations not begun yet, header read, nothing else.
  std::map<uint64_t, RingExchangeReactor*> parked_ ABSL_GUARDED_BY(mu_);
  int data_plane_port_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  // ShutDown's reason; aborted_ holds it too, and ClearAbort restores it.
  absl::Status shut_down_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_WORKER_COLLECTIVE_RING_RECEIVER_H_
