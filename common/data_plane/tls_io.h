// What socket.cc and tls.cc share about calling OpenSSL on a blocking
// socket: how a failed call reads as the plain socket's statuses, and
// keeping SIGPIPE away while OpenSSL writes (it writes without
// MSG_NOSIGNAL, and the processes do not ignore SIGPIPE). Internal to
// common/data_plane/.
#ifndef TESSERA_COMMON_DATA_PLANE_TLS_IO_H_
#define TESSERA_COMMON_DATA_PLANE_TLS_IO_H_

#include <signal.h>

#include "absl/status/status.h"

struct ssl_st;

namespace tessera {

// The status of an OpenSSL call on `ssl` that returned `ret` with errno
// `err` (read right after the call), as socket.h promises: the peer gone
// or the session broken (an alert, a bad record, a certificate refused)
// UNAVAILABLE with OpenSSL's reason; a socket timeout DEADLINE_EXCEEDED.
// `what` names the step ("read", "handshake"). Clears OpenSSL's
// error queue of this thread.
absl::Status TlsCallStatus(const char* what, ssl_st* ssl, int ret, int err);

// Blocks SIGPIPE on this thread for its life, and discards one that a
// write raised meanwhile (but not one that was pending before).
class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe();
  ~ScopedNoSigpipe();
  ScopedNoSigpipe(const ScopedNoSigpipe&) = delete;
  ScopedNoSigpipe& operator=(const ScopedNoSigpipe&) = delete;

 private:
  sigset_t old_;
  bool blocked_ = false;
  bool was_pending_ = false;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_DATA_PLANE_TLS_IO_H_
