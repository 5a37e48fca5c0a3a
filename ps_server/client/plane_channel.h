#ifndef TESSERA_PS_SERVER_CLIENT_PLANE_CHANNEL_H_
#define TESSERA_PS_SERVER_CLIENT_PLANE_CHANNEL_H_

#include <sys/uio.h>

#include <deque>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/data_plane/socket.h"

namespace tessera {

// What reading one reply did: its call's status, and whether the stream is
// still in step (a whole reply was read, an error reply included). A reply
// that was cut off or malformed leaves it out of step.
struct PlaneReply {
  absl::Status status;
  bool in_step = true;
};

// Reads one call's reply, header included, from the socket. `discard`: the
// call was dropped unfinished; read the reply to stay in step but touch
// none of the caller's memory.
using PlaneReplyReader =
    std::function<PlaneReply(Socket& socket, bool discard)>;

// One connection to a parameter server's data plane carrying any number
// of calls at once (#46), pipelined: the server serves a connection's
// requests one at a time and answers them in order
// (common/data_plane/event_listener.h), so a call writes its whole request
// under the write lock (frames never interleave) and queues its reply's
// reader; replies are read in that order.
//
// Who reads: no thread of its own. A thread that needs a reply (its call's
// Wait) reads the replies ahead of it itself, each into its own call's
// buffers through the reader that call queued, and hands them over. So an
// uncontended call costs no wake-up, and no call waits on a thread that is
// busy elsewhere (a split call begun and not yet finished is read by
// whoever needs the replies behind it).
//
// Deadlock: the server reads the next request only after writing the last
// reply, so a writer blocked on a full socket needs someone reading. Before
// writing, a call reads every earlier reply that no thread waits for (a
// split call begun and not finished, which may belong to this very
// thread); the rest have a thread in Wait, which reads without the write
// lock. With TLS the session takes one call at a time (socket.h): a writer
// reads every earlier reply and writes with the reading turn held, so the
// server is idle while a request goes out (one request outstanding).
//
// Errors: a write or read that fails, or a reply out of step, breaks the
// channel: the socket is shut down, the call whose reply broke gets its
// error and every other queued call UNAVAILABLE naming the reason, and
// later sends fail at once (the owner, PlaneConnections, then connects
// afresh).
//
// Thread safety: all methods may be called concurrently.
class PlaneChannel {
 public:
  struct Entry;  // a queued reply

  PlaneChannel(Socket socket, bool tls);
  ~PlaneChannel();
  PlaneChannel(const PlaneChannel&) = delete;
  PlaneChannel& operator=(const PlaneChannel&) = delete;

  // Writes `request` whole and queues `reader` for its reply. `awaited`:
  // the caller calls Wait right after (a split call passes false and is
  // marked awaited by its Wait). *sent tells whether any byte may have left
  // (false: the channel was found broken or closed by the server, and the
  // call can go on another connection unchanged).
  // `reader` is moved from only when queued.
  absl::StatusOr<std::shared_ptr<Entry>> Send(absl::Span<const iovec> request,
                                              PlaneReplyReader&& reader,
                                              bool awaited, bool* sent);
  // Reads replies until `entry`'s was read; its status.
  absl::Status Wait(const std::shared_ptr<Entry>& entry);
  // A call dropped unfinished: its reply is read into scratch (once a
  // reader already at it is done with the caller's buffers, waited for).
  void Abandon(const std::shared_ptr<Entry>& entry);

  bool broken() const;

 private:
  // Reads the oldest queued reply; mu_ is held on entry and on return but
  // not while reading.
  void ReadHeadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails every queued reply not being read; shuts the socket down.
  void BreakLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool MustReadBeforeWriteLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Socket socket_;
  const bool tls_;
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one request at a time
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<Entry>> unread_ ABSL_GUARDED_BY(mu_);
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // someone has the read turn
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

#endif  // TESSERA_PS_SERVER_CLIENT_PLANE_CHANNEL_H_
